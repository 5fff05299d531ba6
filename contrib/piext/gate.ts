// gate.ts is mosaic's fixture extension for pinned Pi 0.85.1 (contrib/piext,
// docs/security.md): a reviewed single file that raises every native dialog
// form from a tool and from a tool_call hook, so the approval tests run
// against the real Pi. It imports nothing, runs no process and touches no
// file. Every outcome is reported back as notify("RESULT ..."), which
// mosaic shows as a notice, so a test can see what the extension received.
//
// The bash tool_call hook gates commands by marker:
//   GATE_CONFIRM  confirm with markup, ANSI, bidi and newlines; false blocks
//   GATE_SELECT   select with such labels; only "Allow <i>once</i>" runs it
//   GATE_TIMEOUT  confirm with a 1500 ms native timeout
//   GATE_INPUT    input with a 1500 ms native timeout (mosaic: disabled)
//   GATE_EDITOR   editor, no timeout (mosaic: disabled; an interrupt cancels it)
//   GATE_UI       the fire-and-forget methods first (combines with the others)
// The tool mosaic_ask raises a confirm itself without passing the tool's
// signal, the case where Pi's abort waits for the dialog.

const hostile =
  "Allow <b>rm -rf</b> **now**? [x](http://127.0.0.1/) \u001b[31mRED\u001b[0m RLO:\u202eevil.exe\u202c\nline2 \u2028 <script>x</script>";
const labels = ["Allow <i>once</i>", "**Block**", "\u202egnp.exe\u202c (RLO label)", "multi\nline", "\u001b[1mbold\u001b[0m"];

export default function (pi: any) {
  pi.on("tool_call", async (event: any, ctx: any) => {
    if (event.toolName !== "bash") return;
    const cmd: string = String(event.input?.command ?? "");
    const block = (why: string) => ({ block: true, reason: why });
    if (cmd.includes("GATE_UI")) {
      ctx.ui.notify("note <b>bold</b> \u202ex\u202c", "warning");
      ctx.ui.setStatus("gate", "status <b>text</b>");
      ctx.ui.setStatus("gate", undefined);
      ctx.ui.setWidget("gate", ["widget line 1", "<b>line 2</b>"]);
      ctx.ui.setTitle("pi \u202etitle\u202c");
      ctx.ui.setEditorText("rm -rf / # from the extension");
    }
    if (cmd.includes("GATE_CONFIRM")) {
      const ok = await ctx.ui.confirm(hostile, "line1\nline2 <i>&amp;</i>");
      ctx.ui.notify(`RESULT confirm=${JSON.stringify(ok)}`, "info");
      if (ok !== true) return block("Blocked by gate confirm");
    } else if (cmd.includes("GATE_SELECT")) {
      const v = await ctx.ui.select(hostile, labels);
      ctx.ui.notify(`RESULT select=${JSON.stringify(v ?? null)}`, "info");
      if (v !== labels[0]) return block("Blocked by gate select");
    } else if (cmd.includes("GATE_TIMEOUT")) {
      const ok = await ctx.ui.confirm("Timed confirm", "resolves by itself in 1.5 s", { timeout: 1500 });
      ctx.ui.notify(`RESULT timeout=${JSON.stringify(ok)}`, "info");
      if (ok !== true) return block("Blocked by gate timeout");
    } else if (cmd.includes("GATE_INPUT")) {
      const v = await ctx.ui.input("Name <u>it</u>", "placeholder **md**", { timeout: 1500 });
      ctx.ui.notify(`RESULT input=${JSON.stringify(v ?? null)}`, "info");
      return block("Blocked by gate input");
    } else if (cmd.includes("GATE_EDITOR")) {
      const v = await ctx.ui.editor("Edit it", "prefill line 1\nline 2");
      ctx.ui.notify(`RESULT editor=${JSON.stringify(v ?? null)}`, "info");
      return block("Blocked by gate editor");
    }
  });

  pi.registerTool({
    name: "mosaic_ask",
    label: "Ask",
    description: "Ask the user to confirm something before going on.",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    async execute(_id: string, params: any, _signal: any, _onUpdate: any, ctx: any) {
      const ok = await ctx.ui.confirm("mosaic_ask", String(params.question));
      ctx.ui.notify(`RESULT ask=${JSON.stringify(ok)}`, "info");
      return { content: [{ type: "text", text: ok ? "confirmed" : "declined" }], details: {} };
    },
  });
}
