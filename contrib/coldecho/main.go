// Command coldecho is the baseline of BenchmarkColdConnect
// (activation/coldconnect_bench_test.go): the smallest socket-activated
// Go server that answers a mosaic hello. It takes the activated listener
// the way the controller does (activation.Listener), answers the first
// line of each connection with a fixed welcome and echoes every later
// line, and tells the manager it is ready after its first answer (its
// units are mosaic-conv@'s, Type=notify).
//
// It is a binary of its own, importing nothing of mosaic but activation,
// so that its start-up is that of a trivial Go program: the test binary,
// which links the client library, the stub model and the testing
// package, takes half again as many page faults to start
// (docs/benchmarks.md).
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/mosaic-agents/mosaic/activation"
)

// welcome is a welcome record of protocol 1 from a server named "echo";
// the benchmark dials it with client.Dial, which checks it.
const welcome = `{"record":"welcome","conversation":"echo","connection":"k-echo","mode":"observer","server":"echo","protocol":1,"starting":true}` + "\n"

func main() {
	l, err := activation.Listener()
	if err != nil {
		fmt.Fprintln(os.Stderr, "coldecho:", err)
		os.Exit(1)
	}
	var ready sync.Once
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(0)
		}
		go serve(c, &ready)
	}
}

func serve(c net.Conn, ready *sync.Once) {
	defer c.Close()
	r := bufio.NewReader(c)
	for first := true; ; first = false {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		if first {
			line = []byte(welcome)
		}
		if _, err := c.Write(line); err != nil {
			return
		}
		ready.Do(func() { activation.Notify("READY=1") })
	}
}
