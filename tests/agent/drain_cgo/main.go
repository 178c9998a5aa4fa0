// A dynamically linked Go program (cgo: the Go runtime makes its threads with pthread_create,
// so the preloaded agent sees them, and it installs handlers on every signal). Two goroutines
// burn CPU in goBurn for the seconds given; prints "cpu_ns N", the process's CPU time (C
// clock()), at the end.
package main

// #include <time.h>
// static long long cpu_ns(void) {
//   struct timespec t;
//   clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
//   return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
// }
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

//go:noinline
func goBurn(d time.Duration) float64 {
	x := 1.0
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for i := 0; i < 1000; i++ {
			x = x*1.0000001 + 1e-9
		}
	}
	return x
}

func main() {
	secs := 0.5
	if len(os.Args) > 1 {
		if v, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			secs = v
		}
	}
	var wg sync.WaitGroup
	sum := make([]float64, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sum[i] = goBurn(time.Duration(secs * float64(time.Second)))
		}(i)
	}
	wg.Wait()
	fmt.Printf("cpu_ns %d\n", int64(C.cpu_ns()))
	if sum[0]+sum[1] < 0 {
		os.Exit(1)
	}
}
