#!/usr/bin/env python3
"""browser_test.py — the kanban board in headless Chromium, two people at once.

What it checks (each step fails the test with a message if it does not hold):
  1. the server starts on a fresh database with its demo board;
  2. two pages, in two separate browser contexts (separate cookies), sign in
     through the sign-in form as alice and as bob, both members of the demo
     board, and open it; both say "live" (their event streams are open);
  3. in alice's page a card is dragged with the mouse from "To do" to
     "Done" — a real HTML5 drag and drop through Chromium's input pipeline
     (Input.setInterceptDrags / dispatchDragEvent, as automation tools do);
  4. bob's page shows the card in "Done" within a second, without a reload;
  5. bob moves it back with the non-drag fallback (the card's dialog: "Move
     to list", "Position", Move) and alice's page follows within a second;
  6. screenshots of the board (desktop and phone width) are written to
     --out: kanban-board.png, kanban-board-phone.png;
  7. what a screen reader gets (Accessibility.getFullAXTree): the board's
     title is a heading of level 1, each list's a heading of level 2, each
     card a button named by its title; and the muted text on the lists
     (computed styles, composited backgrounds) has a WCAG contrast of at
     least 4.5:1 (AA) against what is behind it;
  8. adding a member nobody is called says "no user named ...".

Why the DevTools protocol over a pipe: no npm here, and Chromium's
--remote-debugging-pipe (fd 3 in, fd 4 out, NUL-separated JSON) needs
nothing beyond Python's standard library — not even a WebSocket client.
"""
import argparse
import base64
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time


class Fail(Exception):
    pass


def log(*a):
    print("browser_test:", *a, flush=True)


class Chrome:
    """One Chromium process driven over --remote-debugging-pipe."""

    def __init__(self, binary, profile):
        to_r, to_w = os.pipe()      # we write commands, Chromium reads fd 3
        from_r, from_w = os.pipe()  # Chromium writes fd 4, we read

        def child():
            # via fresh descriptors: dup2(3, 3) would keep 3 close-on-exec
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [binary, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-sync",
                "--hide-scrollbars", "--mute-audio", "--user-data-dir=" + profile,
                "--window-size=1280,800", "about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=child, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (to_r, from_w):
            os.close(fd)
        self.w = to_w
        self.r = from_r
        self.buf = b""
        self.next_id = 0
        self.events = []  # (method, params, sessionId) not yet consumed

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.w, self.r):
            try:
                os.close(fd)
            except OSError:
                pass

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.r], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise Fail("Chromium closed its DevTools pipe (did it start?)")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None, timeout=15):
        self.next_id += 1
        mid = self.next_id
        m = {"id": mid, "method": method, "params": params or {}}
        if session:
            m["sessionId"] = session
        data = json.dumps(m).encode() + b"\0"
        while data:
            n = os.write(self.w, data)
            data = data[n:]
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_message(deadline)
            if msg is None:
                raise Fail("no answer to %s within %s s" % (method, timeout))
            if msg.get("id") == mid:
                if "error" in msg:
                    raise Fail("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append((msg["method"], msg.get("params", {}), msg.get("sessionId")))

    def wait_event(self, method, session=None, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            for i, (m, p, s) in enumerate(self.events):
                if m == method and (session is None or s == session):
                    del self.events[i]
                    return p
            msg = self._read_message(deadline)
            if msg is None:
                return None
            if "method" in msg:
                self.events.append((msg["method"], msg.get("params", {}), msg.get("sessionId")))


class Page:
    """A tab in its own browser context (its own cookies)."""

    def __init__(self, chrome, name):
        self.c = chrome
        self.name = name
        ctx = chrome.send("Target.createBrowserContext")["browserContextId"]
        tid = chrome.send("Target.createTarget", {"url": "about:blank", "browserContextId": ctx})["targetId"]
        self.s = chrome.send("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")

    def send(self, method, params=None, timeout=15):
        return self.c.send(method, params, session=self.s, timeout=timeout)

    def eval(self, expr, timeout=15):
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in r:
            raise Fail("%s: %s raised %s" % (self.name, expr[:80], r["exceptionDetails"].get("text")))
        return r.get("result", {}).get("value")

    def wait(self, expr, timeout=10, what=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                v = self.eval(expr)
            except Fail:
                v = None
            if v:
                return v
            time.sleep(0.02)
        raise Fail("%s: %s did not happen within %s s" % (self.name, what or expr, timeout))

    def goto(self, url):
        self.send("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete' && location.href.startsWith(%s)" % json.dumps(url.split('?')[0]),
                  what="loading " + url)

    def mouse(self, kind, x, y, buttons=0, button="none"):
        self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": button,
                                               "buttons": buttons, "clickCount": 1 if button != "none" else 0})

    def screenshot(self, path):
        data = self.send("Page.captureScreenshot", {"format": "png"}, timeout=30)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))


# The WCAG 2 contrast ratio of each selector's first element: its computed
# colour against its background, composited up the ancestors (over white).
CONTRAST_JS = r"""(sels) => sels.map((sel) => {
  const el = document.querySelector(sel);
  if (!el) return [sel, null, null, null];
  const parse = (s) => {
    const p = s.match(/rgba?\(([^)]*)\)/)[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c[3] > 0) layers.push(c);
    if (c[3] >= 1) break;
  }
  let bg = [255, 255, 255];
  for (const c of layers.reverse()) bg = bg.map((v, i) => c[i] * c[3] + v * (1 - c[3]));
  const fg = parse(getComputedStyle(el).color).slice(0, 3);
  const lum = (c) => {
    const l = c.map((v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
  };
  const a = lum(fg), b = lum(bg);
  return [sel, fg, bg.map(Math.round), (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
})"""

# The muted text of the board: on the lists, on a card, on the page.
MUTED = [".list:not(.add-list) .add-card", ".list .count", ".list .list-menu", ".card-badge",
         ".add-list-btn", ".live"]


def check_accessibility(page):
    """Step 7: headings, card buttons, contrast."""
    page.send("Accessibility.enable")
    nodes = page.send("Accessibility.getFullAXTree", timeout=30)["nodes"]

    def prop(n, name):
        for p in n.get("properties", []):
            if p["name"] == name:
                return p["value"].get("value")
        return None

    seen = [(n.get("role", {}).get("value"), n.get("name", {}).get("value"), prop(n, "level"))
            for n in nodes if not n.get("ignored")]
    state = page.eval("(() => { const s = kanban.state(); return [s.title, s.lists.map((l) =>"
                      " [l.title, l.cards.map((c) => [c.title, !!c.description])])]; })()")
    title, lists = state
    h1 = [name for role, name, level in seen if role == "heading" and level == 1]
    if h1 != [title]:
        raise Fail("%s: the level-1 headings are %s, not the board's title %r" % (page.name, h1, title))
    h2 = [name for role, name, level in seen if role == "heading" and level == 2]
    if h2 != [t for t, _ in lists]:
        raise Fail("%s: the level-2 headings are %s, not the lists' titles %s" % (page.name, h2,
                                                                                 [t for t, _ in lists]))
    buttons = [name for role, name, _ in seen if role == "button"]
    ncards = 0
    for _, cards in lists:
        for t, described in cards:
            want = t + (" (has a description)" if described else "")
            if want not in buttons:
                raise Fail("%s: no button named %r for its card (buttons: %s)" % (page.name, want, buttons))
            ncards += 1
    log("%s: accessibility tree: heading 1 %r, headings 2 %s, %d cards as buttons named by their titles"
        % (page.name, title, h2, ncards))
    found = page.eval("(%s)(%s)" % (CONTRAST_JS, json.dumps(MUTED)))
    for sel, fg, bg, ratio in found:
        if ratio is None:
            raise Fail("%s: nothing matches %s" % (page.name, sel))
        log("contrast %-32s rgb%s on rgb%s: %.2f:1" % (sel, tuple(fg), tuple(bg), ratio))
        if ratio < 4.5:
            raise Fail("%s: %s has a contrast of %.2f:1, under WCAG AA's 4.5:1" % (page.name, sel, ratio))


def start_server(binary, workdir):
    db = os.path.join(workdir, "browser.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    proc = subprocess.Popen([binary, "--port", "0", "--db", db], stdout=subprocess.PIPE,
                            stderr=open(os.path.join(workdir, "server.log"), "w"))
    ready, _, _ = select.select([proc.stdout], [], [], 15)
    if not ready:
        proc.kill()
        raise Fail("the server printed no URL within 15 s")
    line = proc.stdout.readline().decode()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not m:
        proc.kill()
        raise Fail("no URL in the server's first line: %r" % line)
    return proc, "http://127.0.0.1:%s" % m.group(1)


def sign_in(page, base, name, password):
    page.goto(base + "/signin")
    page.eval("""(() => {
      const f = document.getElementById('signin');
      f.querySelector('[name=name]').value = %s;
      f.querySelector('[name=password]').value = %s;
      f.submit(); return true; })()""" % (json.dumps(name), json.dumps(password)))
    page.wait("location.pathname === '/boards' && document.readyState === 'complete'",
              what="signing in as " + name)


def card_list(page, card):
    """The id of the list whose DOM shows `card`, or None."""
    return page.eval("(() => { const c = document.querySelector('.card[data-card=\"%d\"]');"
                     " return c ? Number(c.closest('.cards').dataset.list) : null; })()" % card)


def center(page, selector):
    r = page.eval("(() => { const r = document.querySelector(%s).getBoundingClientRect();"
                  " return [r.left + r.width / 2, r.top + r.height / 2, r.bottom]; })()" % json.dumps(selector))
    if not r:
        raise Fail("%s: no element %s" % (page.name, selector))
    return r


def drag(page, card, target_list):
    """Drag card into target_list, below its last card, with the mouse."""
    x0, y0, _ = center(page, '.card[data-card="%d"]' % card)
    x1, _, bottom = center(page, '.cards[data-list="%d"]' % target_list)
    y1 = bottom - 4
    page.eval("window.__ds = 0; document.addEventListener('dragstart', () => window.__ds++, true); true")
    page.send("Input.setInterceptDrags", {"enabled": True})
    page.mouse("mouseMoved", x0, y0)
    page.mouse("mousePressed", x0, y0, buttons=1, button="left")
    steps = 8
    data = None
    for i in range(1, steps + 1):
        page.mouse("mouseMoved", x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps, buttons=1, button="left")
        ev = page.c.wait_event("Input.dragIntercepted", session=page.s, timeout=0.2)
        if ev is not None:
            data = ev["data"]
            break
    if data is None:
        hit = page.eval("(() => { const e = document.elementFromPoint(%f, %f); return e ? e.outerHTML.slice(0, 120) : null; })()" % (x0, y0))
        raise Fail("%s: Chromium started no drag from card %d (at %.0f,%.0f: %s; dragstart seen: %s)" % (page.name, card, x0, y0, hit, page.eval("window.__ds || 0")))
    for kind in ("dragEnter", "dragOver", "dragOver"):
        page.send("Input.dispatchDragEvent", {"type": kind, "x": x1, "y": y1, "data": data})
        time.sleep(0.03)
    t0 = time.monotonic()
    page.send("Input.dispatchDragEvent", {"type": "drop", "x": x1, "y": y1, "data": data})
    page.mouse("mouseReleased", x1, y1, button="left")
    page.send("Input.setInterceptDrags", {"enabled": False})
    return t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True, help="the kanban binary")
    ap.add_argument("--out", required=True, help="directory for the screenshots and logs")
    ap.add_argument("--chromium", default=None)
    args = ap.parse_args()

    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")
    if not chromium:
        log("FAIL: no chromium found (Debian: apt-get install chromium)")
        return 1
    os.makedirs(args.out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="kanban-browser-")
    server = chrome = None
    try:
        server, base = start_server(os.path.abspath(args.server), workdir)
        log("server at", base)
        chrome = Chrome(chromium, os.path.join(workdir, "profile"))
        chrome.send("Browser.getVersion")
        alice = Page(chrome, "alice")
        bob = Page(chrome, "bob")
        sign_in(alice, base, "alice", "alice-kanban")
        sign_in(bob, base, "bob", "bob-kanban")

        board = alice.eval("(() => { const a = document.querySelector('.board-tile');"
                           " return a ? Number(a.getAttribute('href').split('/').pop()) : null; })()")
        if not board:
            raise Fail("alice sees no board")
        for p in (alice, bob):
            p.goto("%s/boards/%d" % (base, board))
            p.wait("document.getElementById('live').classList.contains('on')", what="the live stream")
        log("both pages show board %d, live" % board)

        # 7: what a screen reader reads, and the contrast of the muted text
        check_accessibility(alice)

        lists = alice.eval("kanban.state().lists.map(l => [l.id, l.title, l.cards.map(c => c.id)])")
        by_title = {t: (i, cards) for i, t, cards in lists}
        todo, done = by_title["To do"], by_title["Done"]
        card = todo[1][0]
        if card_list(bob, card) != todo[0]:
            raise Fail("bob does not see card %d in To do to begin with" % card)

        # 3, 4: alice drags, bob sees it
        t0 = drag(alice, card, done[0])
        alice.wait("(() => { const c = document.querySelector('.card[data-card=\"%d\"]');"
                   " return c && c.closest('.cards').dataset.list === '%d' && !c.classList.contains('moving'); })()"
                   % (card, done[0]), what="the dragged card settling in Done")
        bob.wait("(() => { const c = document.querySelector('.card[data-card=\"%d\"]');"
                 " return c && c.closest('.cards').dataset.list === '%d'; })()" % (card, done[0]),
                 timeout=5, what="card %d appearing in Done" % card)
        dt = time.monotonic() - t0
        log("alice dragged card %d to Done; bob saw it after %.0f ms" % (card, dt * 1000))
        if dt > 1.0:
            raise Fail("bob saw the move only after %.2f s (more than a second)" % dt)
        last = bob.eval("(() => { const cs = document.querySelectorAll('.cards[data-list=\"%d\"] .card');"
                        " return Number(cs[cs.length - 1].dataset.card); })()" % done[0])
        if last != card:
            raise Fail("the card was dropped below the last card of Done but is not last there")
        alice.screenshot(os.path.join(args.out, "kanban-board.png"))

        # 5: bob moves it back to the top of To do with the card's dialog
        bob.eval("document.querySelector('.card[data-card=\"%d\"]').click()" % card)
        bob.wait("document.getElementById('card-dlg').open", what="the card dialog")
        bob.eval("""(() => {
          const ls = document.getElementById('cd-list');
          ls.value = '%d'; ls.dispatchEvent(new Event('change'));
          document.getElementById('cd-pos').value = '0';
          return true; })()""" % todo[0])
        t0 = time.monotonic()
        bob.eval("document.getElementById('cd-move').click()")
        alice.wait("(() => { const c = document.querySelector('.cards[data-list=\"%d\"] .card');"
                   " return c && c.dataset.card === '%d'; })()" % (todo[0], card),
                   timeout=5, what="card %d back on top of To do" % card)
        dt = time.monotonic() - t0
        log("bob moved it back with the move menu; alice saw it after %.0f ms" % (dt * 1000))
        if dt > 1.0:
            raise Fail("alice saw the move only after %.2f s (more than a second)" % dt)

        # alice adds a card by typing into the list's inline form; both see it,
        # and her form stays open for the next card
        doing = by_title["Doing"][0]
        x, y, _ = center(alice, '.list[data-list="%d"] .add-card' % doing)
        alice.mouse("mousePressed", x, y, buttons=1, button="left")
        alice.mouse("mouseReleased", x, y, button="left")
        alice.wait("document.activeElement && document.activeElement.tagName === 'TEXTAREA'",
                   what="the inline card form")
        alice.send("Input.insertText", {"text": "Typed in the browser"})
        t0 = time.monotonic()
        for kind in ("keyDown", "keyUp"):
            alice.send("Input.dispatchKeyEvent", {"type": kind, "key": "Enter", "code": "Enter",
                                                  "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13})
        has_card = ("[...document.querySelectorAll('.cards[data-list=\"%d\"] .card-title')]"
                    ".some(e => e.textContent === 'Typed in the browser')" % doing)
        bob.wait(has_card, timeout=5, what="bob seeing the typed card")
        dt = time.monotonic() - t0
        alice.wait(has_card, what="alice seeing her typed card")
        if not alice.eval("!!document.querySelector('.list[data-list=\"%d\"] .inline-form textarea')" % doing):
            raise Fail("alice's inline form closed after adding a card")
        log("alice typed a new card; bob saw it after %.0f ms" % (dt * 1000))
        if dt > 1.0:
            raise Fail("bob saw the new card only after %.2f s" % dt)

        # 8: a member nobody is called: the toast names the missing user
        alice.eval("document.getElementById('add-member').click()")
        alice.wait("document.getElementById('text-dlg').open", what="the add-member dialog")
        alice.eval("document.getElementById('td-input').value = 'nobody-at-all';"
                   " document.getElementById('td-ok').click()")
        msg = alice.wait("[...document.querySelectorAll('.toast')].map((t) => t.textContent)"
                         ".find((t) => t.includes('nobody-at-all'))", what="the add-member error")
        if "no user named nobody-at-all" not in msg:
            raise Fail("adding a member nobody is called says %r" % msg)
        log("adding a missing member says %r" % msg)

        # 6: a phone-width view
        bob.send("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844,
                                                        "deviceScaleFactor": 2, "mobile": True})
        bob.goto("%s/boards/%d" % (base, board))
        bob.wait("document.getElementById('live').classList.contains('on')", what="the live stream (phone)")
        width = bob.eval("document.querySelector('.list').getBoundingClientRect().width")
        if not width or width < 300:
            raise Fail("on a phone the lists are %s px wide, not the screen's width" % width)
        bob.screenshot(os.path.join(args.out, "kanban-board-phone.png"))
        errors = [p for m, p, _ in chrome.events if m == "Runtime.exceptionThrown"]
        if errors:
            raise Fail("the pages threw: %s" % errors[0].get("exceptionDetails", {}).get("text"))
        log("screenshots:", os.path.join(args.out, "kanban-board.png"),
            os.path.join(args.out, "kanban-board-phone.png"))
        log("PASS")
        return 0
    except Fail as e:
        log("FAIL:", e)
        return 1
    finally:
        if chrome is not None:
            chrome.close()
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                code = server.wait(10)
                if code != 0:
                    log("the server exited with", code, "(see", os.path.join(workdir, "server.log") + ")")
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
                log("the server did not stop within 10 s of SIGTERM")
        shutil.copy(os.path.join(workdir, "server.log"), os.path.join(args.out, "browser-server.log")) \
            if os.path.exists(os.path.join(workdir, "server.log")) else None
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
