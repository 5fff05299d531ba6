package fakepi

import "time"

func cost() obj {
	return obj{{"input", 0}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}, {"total", 0}}
}

// zeroUsage is the usage Pi reports while a message streams, and on
// aborted and error messages.
func zeroUsage() obj {
	return obj{{"input", 0}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}, {"totalTokens", 0}, {"cost", cost()}}
}

// finalUsage is the usage of a finished answer; n numbers the model call.
func finalUsage(n int) obj {
	in := 100 + n
	return obj{{"input", in}, {"output", 20}, {"cacheRead", 0}, {"cacheWrite", 0}, {"reasoning", 0}, {"totalTokens", in + 20}, {"cost", cost()}}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func textContent(text string) obj { return obj{{"type", "text"}, {"text", text}} }

func userMessage(text string, at time.Time) obj {
	return obj{{"role", "user"}, {"content", []any{textContent(text)}}, {"timestamp", ms(at)}}
}

func toolResultMessage(callID, text string, isError bool, at time.Time) obj {
	m := obj{{"role", "toolResult"}, {"toolCallId", callID}, {"toolName", "bash"}, {"content", []any{textContent(text)}}}
	if isError {
		m = append(m, kv{"details", obj{}})
	}
	return append(m, kv{"isError", isError}, kv{"timestamp", ms(at)})
}

func toolCallContent(id, command string) obj {
	return obj{{"type", "toolCall"}, {"id", id}, {"name", "bash"}, {"arguments", obj{{"command", command}}}}
}

// messageText concatenates a message's text parts, as Pi's contentText.
func messageText(m obj) string {
	parts, _ := m.get("content").([]any)
	s := ""
	for _, p := range parts {
		if o, ok := p.(obj); ok && o.get("type") == "text" {
			t, _ := o.get("text").(string)
			s += t
		}
	}
	return s
}
