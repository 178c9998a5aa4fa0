  // The pages' shared start (page_base.js, spliced in by fill_page): errors shown on the page
  // and counted in body[data-errors] (the browser tests read it), the data, element helpers,
  // the summary, an interval's SVG, a sortable table's head and paged body, and start(), which
  // sets body[data-status] ("ok" once drawn without error).
  const errors = [];
  function fail(msg) {
    errors.push(String(msg));
    document.body.dataset.errors = String(errors.length);
    document.getElementById("errors").textContent = "Error: " + errors.join("; ");
  }
  window.addEventListener("error", (ev) => fail(ev.message));

  const D = JSON.parse(document.getElementById("sprofil-data").textContent);
  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const svgEl = (tag, attrs) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  };

  // The page's header: its h1 and the browser's title, and the summary table's [key, value] rows.
  function showSummary(title, tabTitle, pairs) {
    document.getElementById("title").textContent = title;
    document.title = tabTitle;
    const summary = document.getElementById("summary");
    for (const [k, v] of pairs) {
      const tr = el("tr");
      tr.append(el("td", null, k), el("td", null, v));
      summary.append(tr);
    }
  }

  // A 95% interval drawn inline: an SVG of W x H holding `shapes` (the estimate), then the
  // interval from x = lo to x = hi as a whisker in `color`, with `tip` as its tooltip.
  function intervalSvg(W, H, shapes, lo, hi, color, tip) {
    const s = svgEl("svg", { width: W, height: H, role: "img" });
    s.append(...shapes);
    s.append(svgEl("line", { x1: lo, x2: hi, y1: H / 2, y2: H / 2, stroke: color, "stroke-width": 2 }));
    s.append(svgEl("line", { x1: lo, x2: lo, y1: 2, y2: H - 2, stroke: color }));
    s.append(svgEl("line", { x1: hi, x2: hi, y1: 2, y2: H - 2, stroke: color }));
    const t = svgEl("title", {});
    t.textContent = tip;
    s.append(t);
    return s;
  }

  // Sorts the indices `idx` of rows R by field `key`, descending or not; ties keep index order.
  function sortRows(idx, R, key, desc) {
    const d = desc ? -1 : 1;
    idx.sort((a, b) => (R[a][key] < R[b][key] ? -d : R[a][key] > R[b][key] ? d : a - b));
  }

  // The header row of table #id: one th per [label, numeric, sorted ("desc", "asc" or null),
  // onclick].
  function fillHead(id, cols) {
    const thead = document.querySelector("#" + id + " thead");
    thead.textContent = "";
    const tr = el("tr");
    for (const [label, num, sorted, onclick] of cols) {
      const th = el("th", num ? { class: "num" } : null,
                    label + (sorted === "desc" ? " \u25be" : sorted === "asc" ? " \u25b4" : ""));
      if (onclick) th.onclick = onclick;
      tr.append(th);
    }
    thead.append(tr);
  }

  // The body of table #id: row(i) for the first `limit` indices of `idx`; #COUNT tells how many
  // of them are shown ("showing 300 of 812 NOUN") and #MORE, a "show all" button, offers the rest.
  function fillBody(id, idx, limit, row, countId, moreId, noun) {
    const tbody = document.querySelector("#" + id + " tbody");
    tbody.textContent = "";
    const n = Math.min(idx.length, limit);
    for (let k = 0; k < n; ++k) tbody.append(row(idx[k]));
    document.getElementById(countId).textContent =
      (n < idx.length ? "showing " + n + " of " : "") + idx.length + " " + noun;
    document.getElementById(moreId).hidden = n >= idx.length;
  }

  // Runs the page's drawing: body[data-status] becomes "ok", or "error" with the error shown.
  function start(draw) {
    try {
      draw();
      if (!errors.length) document.body.dataset.status = "ok";
    } catch (e) {
      fail(e && e.stack ? e.stack : e);
      document.body.dataset.status = "error";
    }
  }
