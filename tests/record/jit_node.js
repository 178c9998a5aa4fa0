// Node's JIT under record's default (agentless_test.cpp, NodesJitFunctionsAreNamedByItsPerfMap):
// hot() given twice cold()'s count, in turn; prints the CPU each took by node's own measure
// (process.cpuUsage, in seconds) as "hot S\ncold S". Run with node --perf-basic-prof.
function hot(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.sqrt(i) * 1.0001;
  return s;
}
function cold(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.sqrt(i) * 0.9999;
  return s;
}
const n = Number(process.argv[2] || 2e7);
const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
let tHot = 0, tCold = 0, sum = 0;
for (let k = 0; k < 20; k++) {
  const t0 = cpu();
  sum += hot(2 * n / 20);
  const t1 = cpu();
  sum += cold(n / 20);
  tHot += t1 - t0;
  tCold += cpu() - t1;
}
if (sum === 0) process.exitCode = 1;
console.log(`hot ${tHot.toFixed(6)}\ncold ${tCold.toFixed(6)}`);
