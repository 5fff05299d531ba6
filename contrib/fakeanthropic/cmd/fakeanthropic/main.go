// Command fakeanthropic runs the scripted Messages API on a free loopback
// port, prints its base URL on stdout, and on SIGINT/SIGTERM writes the
// request log as JSON lines to the file named by -log (if any).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mosaic-agents/mosaic/contrib/fakeanthropic"
)

func main() {
	logPath := flag.String("log", "", "write the request log here (JSON lines) at exit")
	flag.Parse()
	s, err := fakeanthropic.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(s.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	_ = s.Close()
	if *logPath == "" {
		return
	}
	f, err := os.Create(*logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	enc := json.NewEncoder(f)
	for _, r := range s.Requests() {
		_ = enc.Encode(r)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
