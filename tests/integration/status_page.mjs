// Drives the status page (GET /) of a running `matricxon serve` in headless
// Chromium with puppeteer-core, and checks what it shows against the JSON
// routes: models, the RAM pool, the saved-cache policy (changed through the
// form with the admin token, a bad value shown at its field), a two-turn
// chat (cached tokens on the second turn) and the cache event lines.
// Screenshots at 1280x800 and 390x844 go to <artifacts>.
// Usage: node status_page.mjs <base_url> <admin_token> <artifacts_dir> <chromium>
import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";

const [base, token, artifacts, chromium] = process.argv.slice(2);
const t0 = Date.now();
const failures = [];

function check(cond, what, detail) {
  if (cond) {
    console.log(`ok (${((Date.now() - t0) / 1000).toFixed(1)} s): ${what}`);
  } else {
    console.error(`FAIL: ${what}${detail === undefined ? "" : "\n  " + JSON.stringify(detail)}`);
    failures.push(what);
  }
}

async function json(p, init) {
  const res = await fetch(base + p, init);
  return res.json();
}

// Waits until fn() (run in the page) is truthy; returns its value or null.
async function until(page, fn, arg, ms = 15000) {
  try {
    const handle = await page.waitForFunction(fn, { timeout: ms, polling: 100 }, arg);
    return await handle.jsonValue();
  } catch (e) {
    return null;
  }
}

// What the page shows, by data-field, for one element.
const fieldsOf = (page, selector) =>
  page.$$eval(selector + " [data-field]", (els) =>
    Object.fromEntries(els.map((e) => [e.dataset.field, e.dataset.value ?? e.textContent])));

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
});
const page = await browser.newPage();
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
page.on("console", (m) => {
  if (m.type() === "error" && !/status of 40[01]/.test(m.text())) pageErrors.push(m.text());
});
page.on("dialog", (d) => d.accept());

try {
  // ---- desktop: 1280x800 ----
  await page.setViewport({ width: 1280, height: 800 });
  const res = await page.goto(base + "/", { waitUntil: "load" });
  check(res.status() === 200, "GET / answers 200");
  check((res.headers()["content-security-policy"] || "").includes("script-src 'self'"), "the page has a strict CSP");
  await until(page, () => Number(document.body.dataset.refreshes) >= 1);
  check((await page.$eval("#health", (e) => e.textContent)) === "up", "the page reads the server");
  // The header names the build as /health does.
  const health = await json("/health");
  const version = await until(page, () => document.getElementById("version").textContent || null);
  check(version === `v${health.version} · ${health.commit} · ${health.kernels}`,
        `the header names the build (${version})`);

  // Models: the table shows what /api/models says.
  const api = await json("/api/models");
  const rows = await page.$$eval("#models-table tbody tr[data-model]", (trs) => trs.map((tr) => ({
    name: tr.dataset.model,
    size: Number(tr.querySelector('[data-field="size_bytes"]').dataset.value),
    loaded: tr.querySelector('[data-field="loaded"]').dataset.value === "true",
  })));
  check(JSON.stringify(rows) === JSON.stringify(api.models.map((m) => ({ name: m.name, size: m.size_bytes,
    loaded: m.loaded }))), "the models table equals /api/models", { rows, api: api.models });

  // An admin action without the token is refused, and the page says why.
  await page.click('#models-table tr[data-model="tiny"] button');
  const refused = await until(page, () => {
    const t = document.getElementById("models-msg").textContent;
    return t.includes("admin token") ? t : null;
  });
  check(refused !== null, "without the token, Load is refused with a hint to paste it", refused);

  // The operator pastes the token; Load now works.
  await page.type("#admin-token", token);
  await page.keyboard.press("Enter");
  check((await page.$eval("#admin-token", (e) => e.value)) === "", "the token field is cleared (kept in memory)");
  await page.click('#models-table tr[data-model="tiny"] button');
  const loaded = await until(page, () =>
    document.querySelector('#models-table tr[data-model="tiny"] [data-field="loaded"]')?.dataset.value === "true");
  check(loaded === true, "Load with the token loads the model");

  // Policy: a bad value shows an error at its field and changes nothing.
  const before = await json("/api/cache/persistence");
  await page.$eval("#policy-budget", (e) => { e.value = ""; });
  await page.type("#policy-budget", "-5");
  await page.click("#policy-save");
  const fieldErr = await until(page, () => document.getElementById("policy-budget-error").textContent || null);
  check(fieldErr !== null && fieldErr.includes("budget_mb"), "a bad budget is shown next to its field", fieldErr);
  check((await page.$eval("#policy-budget", (e) => e.getAttribute("aria-invalid"))) === "true",
    "the bad field is marked aria-invalid");
  check((await json("/api/cache/persistence")).budget_mb === before.budget_mb, "the bad value changed nothing");
  // A good one is saved, and GET /api/cache/persistence shows it.
  const budget = before.budget_mb === 1234 ? 1235 : 1234;
  await page.$eval("#policy-budget", (e) => { e.value = ""; });
  await page.type("#policy-budget", String(budget));
  await page.click("#policy-save");
  const saved = await until(page, () => document.getElementById("policy-msg").textContent.startsWith("Policy saved"));
  check(saved === true, "the policy form saves with the token");
  check((await json("/api/cache/persistence")).budget_mb === budget, "GET /api/cache/persistence shows the new budget");
  check((await page.$eval("#policy-budget-error", (e) => e.textContent)) === "", "the field error is gone");
  const shown = await until(page, (b) => document.querySelector('#saved-figures [data-field="budget_mb"]')
    .dataset.value === String(b), budget);
  check(shown === true, "the saved-cache figures show the new budget");

  // Chat: two turns through the chat box; the second reuses the first.
  await page.$eval("#chat-max", (e) => { e.value = "8"; });
  // Greedy: the synthetic model's reply is then the same every run (sampled,
  // it may end at once with an empty reply).
  await page.$eval("#chat-temp", (e) => { e.value = "0"; });
  const turn = async (text, n) => {
    await page.type("#chat-input", text);
    await page.keyboard.press("Enter");
    return until(page, (k) => {
      const u = document.querySelectorAll("#chat-log .turn.assistant .usage")[k];
      return u && u.dataset.prompt ? { prompt: Number(u.dataset.prompt), cached: Number(u.dataset.cached) } : null;
    }, n, 30000);
  };
  const first = await turn("Hello there, which colour is the sky?", 0);
  check(first !== null && first.prompt > 0, "the first chat turn streams a reply with its usage", first);
  const second = await turn("And the sea?", 1);
  check(second !== null && second.cached > 0, "the second turn shows cached tokens > 0", second);
  const reply = await page.$$eval("#chat-log .turn.assistant .text", (es) => es.map((e) => e.textContent));
  check(reply.some((r) => r.length > 0 && r !== "(the reply was empty)"), "the reply's text is shown", reply);

  // Events: one line per request, newest first, the second one reusing.
  const events = await until(page, () => {
    const lis = [...document.querySelectorAll("#events li")];
    return lis.length >= 2 ? lis.map((li) => ({ source: li.dataset.source, cached: Number(li.dataset.cached),
      line: li.querySelector(".line").textContent })) : null;
  });
  check(events !== null, "the cache event lines appear", events);
  if (events) {
    check(/^reused \d+ of \d+ tokens from RAM/.test(events[0].line) && events[0].cached === second.cached,
      "the newest line says what the second turn reused", events[0]);
    check(events[1].line.startsWith("re-reading the entire chat"), "the first turn read the entire chat", events[1]);
    const apiEvents = (await json("/api/cache/events")).events;
    check(apiEvents.length === events.length, "as many lines as /api/cache/events has", apiEvents.length);
  }

  // The pool: the page's figures equal /api/cache (once its poll has caught up).
  const expectPool = async () => {
    const p = (await json("/api/cache")).models.find((m) => m.model === "tiny");
    return p && {
      entries: String(p.entries.length), tokens: String(p.entries.reduce((s, e) => s + e.tokens, 0)),
      used_bytes: String(p.used_bytes), budget_bytes: String(p.budget_bytes),
      in_use: String(p.entries.filter((e) => e.in_use).length), lookups: String(p.lookups), hits: String(p.hits),
      tokens_reused: String(p.tokens_reused), copies: String(p.copies), evictions: String(p.evictions),
    };
  };
  const want = await expectPool();
  const got = await until(page, (w) => {
    const box = document.querySelector('#pools .pool[data-model="tiny"]');
    if (!box) return null;
    const f = Object.fromEntries([...box.querySelectorAll("dd[data-field]")].map((d) => [d.dataset.field,
      d.dataset.value]));
    return Object.keys(w).every((k) => f[k] === w[k]) ? f : null;
  }, want);
  check(got !== null, "the pool figures equal /api/cache", { want, page: await fieldsOf(page, "#pools .pool") });
  const segs = await page.$$eval('#pools .pool[data-model="tiny"] .bar .seg', (s) => s.length);
  check(segs === Number(want.entries), "the bar has one block per entry", segs);
  // The traffic figures come from /metrics once two samples exist.
  const ttft = await until(page, () =>
    document.querySelector('#traffic-figures [data-field="ttft_ms"]').dataset.value || null, null, 8000);
  check(ttft !== null && Number(ttft) > 0, "the time to first token is shown from /metrics", ttft);

  // A few more samples, so that the screenshot shows the chart drawn.
  const polls = await page.evaluate(() => Number(document.body.dataset.refreshes));
  await until(page, (n) => Number(document.body.dataset.refreshes) >= n + 3, polls, 10000);
  fs.mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: path.join(artifacts, "status-page-desktop.png"), fullPage: true });

  // Keyboard: the first Tab reaches the skip link; every control has a label.
  await page.reload({ waitUntil: "load" });
  await until(page, () => Number(document.body.dataset.refreshes) >= 1);
  await page.keyboard.press("Tab");
  check((await page.evaluate(() => document.activeElement.className)) === "skip", "Tab first reaches the skip link");
  const unlabeled = await page.$$eval("input, select, textarea", (els) =>
    els.filter((e) => e.labels.length === 0 && !e.getAttribute("aria-label")).map((e) => e.id));
  check(unlabeled.length === 0, "every form control has a label", unlabeled);

  // ---- phone: 390x844 ----
  await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true, deviceScaleFactor: 1 });
  await page.reload({ waitUntil: "load" });
  await until(page, () => document.querySelector('#pools .pool[data-model="tiny"]') !== null);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 0, "no sideways scrolling at 390 px", overflow);
  await page.screenshot({ path: path.join(artifacts, "status-page-phone.png"), fullPage: true });

  check(pageErrors.length === 0, "no script errors or CSP violations in the page", pageErrors);
} finally {
  await browser.close();
}
console.log(`${failures.length === 0 ? "all status page checks passed" : failures.length + " checks failed"} in ` +
  `${((Date.now() - t0) / 1000).toFixed(1)} s; screenshots in ${artifacts}`);
process.exit(failures.length === 0 ? 0 : 1);
