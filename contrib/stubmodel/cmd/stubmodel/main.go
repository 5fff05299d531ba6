// Command stubmodel serves a scripted OpenAI-compatible model on
// 127.0.0.1 for the real Pi, for demos and manual runs.
//
//	stubmodel [-script FILE] [-agent-dir DIR]
//
// It prints the base URL and, with -agent-dir, writes DIR/models.json and
// prints the Pi flags and environment to use, then serves until SIGINT or
// SIGTERM. Without -script it answers text, runs one bash tool call, and
// answers text again.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

func defaultScript() stubmodel.Script {
	return stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Hello! ", "I will ", "run a ", "command."}, Tool: &stubmodel.ToolCall{Command: "echo hello from bash"}},
		{Text: []string{"The command ", "said hello. ", "Done."}},
	}}
}

func main() {
	scriptPath := flag.String("script", "", "JSON script (default: text, one bash tool call, text)")
	agentDir := flag.String("agent-dir", "", "write models.json for Pi into this directory")
	flag.Parse()

	script := defaultScript()
	if *scriptPath != "" {
		s, err := stubmodel.LoadScript(*scriptPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stubmodel:", err)
			os.Exit(2)
		}
		script = s
	}
	srv, err := stubmodel.Start(script)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stubmodel:", err)
		os.Exit(1)
	}
	fmt.Printf("base-url %s\n", srv.BaseURL())
	if *agentDir != "" {
		m, err := stubmodel.WriteAgentDir(*agentDir, srv.BaseURL())
		if err != nil {
			fmt.Fprintln(os.Stderr, "stubmodel:", err)
			os.Exit(1)
		}
		fmt.Printf("PI_CODING_AGENT_DIR=%s pi --mode rpc --provider %s --model %s ...\n", m.AgentDir, m.Provider, m.Model)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "stubmodel:", err)
		os.Exit(1)
	}
}
