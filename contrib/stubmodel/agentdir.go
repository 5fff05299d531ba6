package stubmodel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Names of the custom provider and model written by WriteAgentDir; they
// match the recordings of real Pi runs.
const (
	DefaultProvider = "fakellm"
	DefaultModel    = "fake-model"
)

// PiModel is what Pi needs to select the stub: pass Provider and Model as
// --provider and --model, and AgentDir as PI_CODING_AGENT_DIR.
type PiModel struct {
	AgentDir string
	Provider string
	Model    string
}

// WriteAgentDir writes dir/models.json with a custom provider pointing at
// baseURL (the server's BaseURL) and returns the values to start Pi with.
//
// The provider uses api "openai-completions" with a dummy apiKey (Pi treats
// a model without auth as unavailable and refuses prompts with "No API key
// found") and compat flags off, since the stub understands neither the
// developer role nor reasoning_effort.
func WriteAgentDir(dir, baseURL string) (PiModel, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return PiModel{}, fmt.Errorf("stubmodel: agent dir: %w", err)
	}
	cfg := map[string]any{
		"providers": map[string]any{
			DefaultProvider: map[string]any{
				"baseUrl": baseURL,
				"api":     "openai-completions",
				"apiKey":  "stub-dummy-key",
				"compat": map[string]any{
					"supportsDeveloperRole":   false,
					"supportsReasoningEffort": false,
				},
				"models": []any{map[string]any{
					"id":            DefaultModel,
					"name":          "Fake Model",
					"reasoning":     false,
					"input":         []string{"text"},
					"contextWindow": 128000,
					"maxTokens":     4096,
					"cost":          map[string]any{"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
				}},
			},
		},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return PiModel{}, fmt.Errorf("stubmodel: encode models.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "models.json"), b, 0o644); err != nil {
		return PiModel{}, fmt.Errorf("stubmodel: write models.json: %w", err)
	}
	return PiModel{AgentDir: dir, Provider: DefaultProvider, Model: DefaultModel}, nil
}
