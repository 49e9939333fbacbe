package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The playground in a real browser: Debian's chromium, driven by
// chromedp, against a fresh `bot playground` (no settings: the demo
// model and the built-in demo notes server). One browser and one
// playground serve every scenario, in order.

// findChromium returns a Chromium or Chrome binary on PATH, "" if none.
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// outputDir is where the screenshot goes: $TEST_OUTPUT_DIR, else the
// test's artifact directory.
func outputDir(t *testing.T) string {
	if d := os.Getenv("TEST_OUTPUT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

func TestPlaygroundInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped with -short")
	}
	browser := findChromium()
	if browser == "" {
		t.Skip("no chromium on PATH (apt-get install -y chromium): browser test skipped")
	}
	start := time.Now()

	addr := freeAddr(t)
	env := map[string]string{
		"PLAYGROUND_ADDR": addr,
		"REDIS_URL":       os.Getenv("REDIS_URL"),
		"SHUTDOWN_GRACE":  "3s",
	}
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runPlayground(ctx, envFunc(env), &out, &out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("playground: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("playground did not stop")
		}
		if t.Failed() {
			t.Logf("playground output:\n%s", out.String())
		}
	})

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900))
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	// A hang guard for the whole scenario, not a performance bound.
	bctx, cancelTimeout := context.WithTimeout(bctx, 3*time.Minute)
	defer cancelTimeout()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Skipf("chromium (%s) does not start here: %v", browser, err)
	}
	browserUp := time.Since(start)
	b := &tab{t: t, ctx: bctx}

	// 1. Open the page; mention the bot; the answer streams into the
	// thread and completes with an approval prompt. The typed markup
	// must show as text.
	b.do("open the page", chromedp.Navigate("http://"+addr+"/#as=U0ALICE&c=C0GENERAL"), chromedp.WaitVisible(chromedp.ID("composer-text")))
	b.wait("the bot connects", `document.getElementById('conn').textContent.includes('is connected')`)
	if evalJS[bool](b, "the thread pane on first load", `getComputedStyle(document.getElementById('thread')).display !== 'none'`) {
		t.Error("the thread pane shows before any thread is opened")
	}
	b.do("mention the bot", chromedp.SendKeys(chromedp.ID("composer-text"), "@bobbin hello from the browser <img src=x onerror=alert(1)>"+kb.Enter))
	mentioned := time.Now()
	b.wait("the reply thread", `[...document.querySelectorAll('#messages .link-btn')].some(b => /repl/.test(b.textContent))`)
	b.do("open the thread", chromedp.Click(`//ol[@id='messages']//button[contains(., 'repl')]`))
	// Sample the bot's first message as it grows.
	var lengths []int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(40 * time.Millisecond) {
		n := evalJS[int](b, "read the answer", `(() => { const m = document.querySelector('#thread-messages .msg.bot .msg-content'); return m ? m.textContent.length : 0 })()`)
		if n > 0 && (len(lengths) == 0 || lengths[len(lengths)-1] != n) {
			lengths = append(lengths, n)
		}
		if evalJS[bool](b, "look for the prompt", `[...document.querySelectorAll('#thread-messages button')].some(b => b.textContent === 'Allow once') && !document.querySelector('#thread-messages .msg.streaming')`) {
			break
		}
	}
	t.Logf("the first answer grew through %d lengths: %v", len(lengths), lengths)
	if len(lengths) < 3 {
		t.Errorf("the streamed answer was seen at lengths %v: want it to grow in several steps", lengths)
	}
	for i := 1; i < len(lengths); i++ {
		if lengths[i] < lengths[i-1] {
			t.Errorf("the answer shrank while streaming: %v", lengths)
		}
	}
	b.wait("the demo says what it is", `document.getElementById('thread-messages').textContent.includes('demo model')`)
	if evalJS[bool](b, "typed markup", `!!document.querySelector('.msg img[src="x"]') || !document.getElementById('messages').textContent.includes('<img src=x onerror=alert(1)>')`) {
		t.Error("typed markup became an element (or vanished) instead of showing as text")
	}

	// 2. Another member presses Allow once: refused, and only they see why.
	b.as("U0BOB")
	b.do("bob opens the thread", chromedp.Click(`//ol[@id='messages']//button[contains(., 'repl')]`))
	b.wait("bob sees the prompt", `[...document.querySelectorAll('#thread-messages button')].some(b => b.textContent === 'Allow once')`)
	b.do("bob clicks Allow once", chromedp.Click(`//ol[@id='thread-messages']//button[normalize-space()='Allow once']`))
	b.wait("bob is refused", `[...document.querySelectorAll('#thread-messages .msg.ephemeral')].some(m => m.textContent.includes('Only visible to you'))`)

	// 3. The asker presses Allow once: the tool runs, its result streams in.
	b.as("U0ALICE")
	b.do("alice opens the thread", chromedp.Click(`//ol[@id='messages']//button[contains(., 'repl')]`))
	b.wait("alice sees the prompt and no refusal", `[...document.querySelectorAll('#thread-messages button')].some(b => b.textContent === 'Allow once') && !document.querySelector('#thread-messages .msg.ephemeral')`)
	b.do("alice clicks Allow once", chromedp.Click(`//ol[@id='thread-messages']//button[normalize-space()='Allow once']`))
	b.wait("the tool result", `document.getElementById('thread-messages').textContent.includes('Saved note 1:')`)
	toResult := time.Since(mentioned)
	t.Logf("from the mention to the tool result: %s (two people's clicks included)", toResult.Round(time.Millisecond))
	b.wait("the answer completes", `!document.querySelector('#thread-messages .msg.streaming') && ![...document.querySelectorAll('#thread-messages button')].some(b => b.textContent === 'Stop')`)
	shot := runTab[[]byte](b, "screenshot the thread", chromedp.FullScreenshot(100))
	shotPath := filepath.Join(outputDir(t), "playground-thread.png")
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the thread view: %s", shotPath)

	// 3a. 👍 under the answer is a button (not "[unsupported …]"); pressing
	// it thanks the clicker alone.
	if evalJS[bool](b, "look for unsupported blocks", `document.getElementById('thread-messages').textContent.includes('unsupported')`) {
		t.Error("the thread shows an unsupported block")
	}
	b.do("press 👍", chromedp.Click(`(//ol[@id='thread-messages']//button[normalize-space()='👍'])[last()]`))
	b.wait("the thanks", `[...document.querySelectorAll('#thread-messages .msg.ephemeral')].some(m => m.textContent.includes('Thanks for the feedback'))`)

	// 3b. ✕ closes the thread pane.
	b.do("close the thread", chromedp.Click(chromedp.ID("thread-close")))
	b.wait("the pane closes", `getComputedStyle(document.getElementById('thread')).display === 'none'`)
	shot = runTab[[]byte](b, "screenshot without the thread", chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(outputDir(t), "playground-thread-closed.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// 3c. Stop a second turn while it waits for approval.
	b.do("ask again", chromedp.SendKeys(chromedp.ID("composer-text"), "@bobbin show me a tool"+kb.Enter))
	b.wait("the second thread", `[...document.querySelectorAll('#messages .msg')].filter(m => [...m.querySelectorAll('.link-btn')].some(b => /repl/.test(b.textContent))).length >= 2`)
	b.do("open the second thread", chromedp.Click(`(//ol[@id='messages']//button[contains(., 'repl')])[2]`))
	b.wait("the Stop button", `[...document.querySelectorAll('#thread-messages button')].some(b => b.textContent === 'Stop') && [...document.querySelectorAll('#thread-messages button')].some(b => b.textContent === 'Allow once')`)
	b.do("stop", chromedp.Click(`//ol[@id='thread-messages']//button[normalize-space()='Stop']`))
	b.wait("stopped", `document.getElementById('thread-messages').textContent.includes('Stopped by')`)
	// The bot escapes its answer's markdown block, its Stop footer
	// included, so Slack (and the page) show that mention as typed; the
	// withdrawn prompt's mrkdwn mention shows as a name.
	if txt := evalJS[string](b, "the thread text", `document.getElementById('thread-messages').textContent`); !strings.Contains(txt, "stopped by @alice") {
		t.Errorf("the withdrawn prompt's mention did not render as a name: %q", txt)
	}
	shot = runTab[[]byte](b, "screenshot the stopped thread", chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(outputDir(t), "playground-stopped.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// 4. /bobbin mcp list answers only the person who typed it.
	b.do("mcp list", chromedp.SendKeys(chromedp.ID("composer-text"), "/bobbin mcp list"+kb.Enter))
	b.wait("the list", `[...document.querySelectorAll('#messages .msg.ephemeral')].some(m => m.textContent.includes('demo'))`)

	// 5. An admin opens the add-server form and submits a bad name: the
	// error shows under the field and the form stays open with what was
	// typed.
	b.as("U0CAROL")
	b.do("mcp add form", chromedp.SendKeys(chromedp.ID("composer-text"), "/bobbin mcp add"+kb.Enter))
	b.wait("the modal opens", `document.getElementById('modal').open && document.getElementById('modal-body').querySelectorAll('input, textarea').length >= 2`)
	if txt := evalJS[string](b, "the form's text", `document.getElementById('modal-body').innerText`); strings.Contains(txt, "unsupported") || strings.Contains(txt, "(optional) (optional)") {
		t.Errorf("the add-server form is not drawn as Slack would: %q", txt)
	}
	if !evalJS[bool](b, "the form's checkbox", `!!document.querySelector('#modal-body input[type=checkbox]')`) {
		t.Error("the add-server form's checkbox is not drawn")
	}
	nameField := `//dialog[@id='modal']//label[starts-with(normalize-space(), 'Name')]/following-sibling::input`
	b.do("fill the form",
		chromedp.SendKeys(nameField, "bad name!"),
		chromedp.SendKeys(`//dialog[@id='modal']//label[starts-with(normalize-space(), 'HTTPS URL')]/following-sibling::input`, "https://mcp.example.com/mcp"),
		chromedp.Click(chromedp.ID("modal-submit")))
	b.wait("the field error", `document.getElementById('modal').open && !!document.querySelector('#modal .field-error') && !!document.querySelector('#modal [aria-invalid="true"]')`)
	shot = runTab[[]byte](b, "screenshot the form", chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(outputDir(t), "playground-modal.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if typed := runTab[string](b, "the name field", chromedp.Value(nameField)); typed != "bad name!" {
		t.Errorf("after the error the name field holds %q, want what was typed", typed)
	}
	b.do("close the form", chromedp.Click(chromedp.ID("modal-close")))
	b.wait("the modal closes", `!document.getElementById('modal').open`)

	t.Logf("browser scenarios: %s in all (browser start %s)", time.Since(start).Round(time.Millisecond), browserUp.Round(time.Millisecond))
}

// tab drives one browser tab; every failure dumps the page's text.
type tab struct {
	t   *testing.T
	ctx context.Context
}

func (b *tab) fail(what string, err error) {
	b.t.Helper()
	dump, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
	b.t.Fatalf("%s: %v\npage text:\n%s", what, err, dump)
}

func (b *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

// wait polls a JavaScript expression until it is truthy.
func (b *tab) wait(what, expr string) {
	b.t.Helper()
	runTab[chromedp.Void](b, what, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
}

// as picks a person in the page's user picker.
func (b *tab) as(id string) {
	b.t.Helper()
	evalJS[bool](b, "switch to "+id, fmt.Sprintf(`(() => { const s = document.getElementById('who'); s.value = %q; s.dispatchEvent(new Event('change')); return true })()`, id))
	b.wait("the page shows "+id, fmt.Sprintf(`location.hash.includes('as=%s')`, id))
}

func runTab[T any](b *tab, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}

func evalJS[T any](b *tab, what, expr string) T {
	b.t.Helper()
	return runTab[T](b, what, chromedp.Evaluate[T](expr))
}
