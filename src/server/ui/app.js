// The status page: reads the server's JSON routes every two seconds and
// renders them; calls the admin routes with the token the operator pastes
// (kept in this script's memory only, sent only to this server). No
// framework, no build step: the server embeds this file as it is.
"use strict";
(() => {
  const POLL_MS = 2000;
  const CHART_POINTS = 60;  // two minutes at POLL_MS
  const MAX_EVENTS = 200;

  const $ = (id) => document.getElementById(id);
  let adminToken = "";

  // ---- small helpers ----

  // el("td", {class: "num", dataset: {value: 3}}, "3"): text is always set as
  // text, never parsed as HTML (model names and reasons come from the server).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "dataset") Object.assign(e.dataset, v);
      else if (k === "class") e.className = v;
      else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }
  const num = (n) => Number(n).toLocaleString("en-US");
  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = Number(n), i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(v < 10 ? 2 : 1)) + " " + units[i];
  }
  function share(part, whole) {
    const pct = 100 * part / Math.max(whole, 1);
    return pct > 0 && pct < 0.1 ? "< 0.1 %" : pct.toFixed(1) + " %";
  }
  function ago(unixMs) {
    const s = Math.max(0, Math.round((Date.now() - unixMs) / 1000));
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    return Math.round(s / 3600) + " h ago";
  }
  function say(id, text, kind) {
    const p = $(id);
    p.textContent = text || "";
    p.className = "msg" + (kind ? " " + kind : "");
  }
  function figure(dl, field, value, text) {
    const dd = dl.querySelector(`[data-field="${field}"]`);
    dd.dataset.value = String(value);
    dd.textContent = text === undefined ? String(value) : text;
  }

  // fetch() on this server: JSON back, or an Error with the server's message
  // (and .status, .param: the field a 400 names).
  async function api(method, path, body, extraHeaders) {
    const headers = Object.assign({}, extraHeaders);
    if (adminToken && !headers.Authorization) headers.Authorization = "Bearer " + adminToken;
    const init = { method, headers, cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch (_) { /* not JSON: /metrics */ }
    if (!res.ok) {
      let message = (json && json.error && json.error.message) || text || "HTTP " + res.status;
      if (res.status === 401 && !headers.Authorization) message += " (paste the admin token at the top)";
      const err = new Error(message);
      err.status = res.status;
      err.param = json && json.error ? json.error.param : null;
      throw err;
    }
    return json !== null ? json : text;
  }

  // Renders only when the data changed, so focus and selection survive polls.
  const lastSeen = {};
  function changed(key, data) {
    const s = JSON.stringify(data);
    if (lastSeen[key] === s) return false;
    lastSeen[key] = s;
    return true;
  }

  // ---- admin token ----

  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = $("admin-token");
    adminToken = input.value.trim();
    input.value = "";
    $("token-state").textContent = adminToken ? "token in use (this tab's memory only)" : "no token";
    refresh();
  });
  $("token-forget").addEventListener("click", () => {
    adminToken = "";
    $("token-state").textContent = "token forgotten";
    refresh();
  });

  // ---- models ----

  let models = [];
  function renderModels(list) {
    models = list;
    const body = $("models-table").tBodies[0];
    body.replaceChildren();
    if (list.length === 0) {
      body.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No models in the models folder.")));
    }
    for (const m of list) {
      const button = el("button", { type: "button", class: "small", "aria-label": (m.loaded ? "Unload " : "Load ") + m.name },
        m.loaded ? "Unload" : "Load");
      button.addEventListener("click", () => loadOrUnload(m, button));
      body.append(el("tr", { dataset: { model: m.name } },
        el("th", { scope: "row", dataset: { field: "name" } }, m.name),
        el("td", { class: "num", dataset: { field: "size_bytes", value: m.size_bytes } }, bytes(m.size_bytes)),
        el("td", { dataset: { field: "loaded", value: m.loaded }, class: m.loaded ? "state-loaded" : "" },
          m.loaded ? "loaded" : "not loaded"),
        el("td", { class: "num", dataset: { field: "active_requests", value: m.active_requests } },
          num(m.active_requests)),
        el("td", { dataset: { field: "capabilities" } }, (m.capabilities || []).join(", ")),
        el("td", {}, button)));
    }
    renderModelChoice(list);
  }
  async function loadOrUnload(m, button) {
    const verb = m.loaded ? "unload" : "load";
    button.disabled = true;
    say("models-msg", (m.loaded ? "Unloading " : "Loading ") + m.name + "…");
    try {
      await api("POST", `/api/models/${encodeURIComponent(m.name)}/${verb}`);
      say("models-msg", m.name + (m.loaded ? " unloaded." : " loaded."), "ok");
    } catch (e) {
      say("models-msg", `Could not ${verb} ${m.name}: ${e.message}`, "bad");
    }
    button.disabled = false;
    refresh();
  }

  // ---- RAM pools ----

  function poolFigures(p) {
    const inUse = p.entries.filter((e) => e.in_use).length;
    const tokens = p.entries.reduce((s, e) => s + e.tokens, 0);
    return [
      ["entries", p.entries.length, `${num(p.entries.length)} of ${num(p.slots)}`, "Entries"],
      ["tokens", tokens, num(tokens), "Tokens"],
      ["used_bytes", p.used_bytes, bytes(p.used_bytes), "Bytes"],
      ["budget_bytes", p.budget_bytes, bytes(p.budget_bytes), "Budget"],
      ["in_use", inUse, num(inUse), "In use"],
      ["lookups", p.lookups, num(p.lookups), "Lookups"],
      ["hits", p.hits, num(p.hits), "Hits"],
      ["tokens_reused", p.tokens_reused, num(p.tokens_reused), "Tokens reused"],
      ["copies", p.copies, num(p.copies), "Copies"],
      ["evictions", p.evictions, num(p.evictions), "Evictions"],
    ];
  }
  function renderPools(pools) {
    const box = $("pools");
    box.replaceChildren();
    if (pools.length === 0) box.append(el("p", { class: "muted" }, "No model is loaded: no pool to show."));
    for (const p of pools) {
      const dl = el("dl", { class: "figures" });
      for (const [field, value, text, label] of poolFigures(p)) {
        dl.append(el("div", {}, el("dt", {}, label), el("dd", { dataset: { field, value } }, text)));
      }
      const scale = Math.max(p.budget_bytes, p.used_bytes, 1);
      const bar = el("div", { class: "bar", role: "img",
        "aria-label": `${p.model}: ${bytes(p.used_bytes)} of ${bytes(p.budget_bytes)} in ${p.entries.length} entries` });
      const rows = el("tbody");
      for (const e of p.entries) {
        const seg = el("span", { class: "seg" + (e.in_use ? " in-use" : ""), dataset: { entry: e.id, bytes: e.bytes },
          title: `entry ${e.id}: ${num(e.tokens)} tokens, ${bytes(e.bytes)}${e.in_use ? ", in use" : ""}` });
        seg.style.width = (100 * e.bytes / scale).toFixed(3) + "%";  // CSSOM: allowed by the page's CSP
        bar.append(seg);
        rows.append(el("tr", { dataset: { entry: e.id } },
          el("td", { class: "num" }, e.id), el("td", { class: "num" }, num(e.tokens)),
          el("td", { class: "num" }, bytes(e.bytes)), el("td", {}, e.in_use ? "in use" : "idle"),
          el("td", {}, ago(e.last_used_unix_ms))));
      }
      const table = el("details", {}, el("summary", {}, `Entries (${p.entries.length})`),
        el("div", { class: "table-wrap" }, el("table", {},
          el("thead", {}, el("tr", {}, ...["Id", "Tokens", "Bytes", "State", "Last used"].map((h) =>
            el("th", { scope: "col" }, h)))), rows)));
      box.append(el("div", { class: "pool", dataset: { model: p.model } },
        el("h3", {}, p.model), dl, bar,
        el("p", { class: "legend" }, el("span", { class: "sw idle" }), "idle entry",
          el("span", { class: "sw in-use" }), `in use · ${bytes(p.used_bytes)} of the ${bytes(p.budget_bytes)} ` +
          `budget (${share(p.used_bytes, p.budget_bytes)}), the bar's full width`),
        table));
    }
  }

  // ---- saved caches and their policy ----

  let policy = null;      // the last policy read from the server
  let policyDirty = false;  // the form holds edits not saved yet
  const policyInputs = { enabled: "policy-enabled", budget_mb: "policy-budget", ttl_hours: "policy-ttl" };

  function renderSaved(s) {
    const dl = $("saved-figures");
    figure(dl, "enabled", s.enabled, s.enabled ? "on" : "off");
    figure(dl, "files", s.files, num(s.files));
    figure(dl, "used_bytes", s.used_bytes, bytes(s.used_bytes));
    figure(dl, "budget_mb", s.budget_mb, num(s.budget_mb) + " MiB");
    figure(dl, "ttl_hours", s.ttl_hours, s.ttl_hours === 0 ? "never expire" : num(s.ttl_hours) + " h");
    figure(dl, "key_source", s.key_source);
    figure(dl, "queued", s.queued || 0, `${num(s.queued || 0)} (${bytes(s.queued_bytes || 0)})`);
    const seg = $("saved-bar").firstElementChild;
    const budget = s.budget_mb * 1048576;
    seg.style.width = Math.min(100, 100 * s.used_bytes / Math.max(budget, 1)).toFixed(3) + "%";
    $("saved-bar").setAttribute("aria-label", `${bytes(s.used_bytes)} of ${bytes(budget)} on disk`);
    const why = $("saved-why");
    why.hidden = !s.disabled_reason;
    why.textContent = s.disabled_reason ? "Saving is off: " + s.disabled_reason : "";
    policy = { enabled: s.enabled, budget_mb: s.budget_mb, ttl_hours: s.ttl_hours };
    if (!policyDirty) fillPolicyForm();
  }
  function fillPolicyForm() {
    if (!policy) return;
    $("policy-enabled").checked = policy.enabled;
    $("policy-budget").value = policy.budget_mb;
    $("policy-ttl").value = policy.ttl_hours;
  }
  function fieldError(name, message) {
    const input = $(policyInputs[name]);
    const out = $(policyInputs[name] + "-error");
    out.textContent = message || "";
    if (message) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  }
  function clearFieldErrors() { for (const name of Object.keys(policyInputs)) fieldError(name, ""); }

  $("policy-form").addEventListener("input", () => { policyDirty = true; });
  $("policy-reset").addEventListener("click", () => {
    policyDirty = false;
    clearFieldErrors();
    fillPolicyForm();
    say("policy-msg", "");
  });
  $("policy-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearFieldErrors();
    // Only what changed: an untouched field is never re-sent (turning saving
    // "on" again where the server keeps it off would fail for no reason).
    const patch = {};
    const enabled = $("policy-enabled").checked;
    if (!policy || enabled !== policy.enabled) patch.enabled = enabled;
    for (const name of ["budget_mb", "ttl_hours"]) {
      const input = $(policyInputs[name]);
      if (input.value.trim() === "" || input.validity.badInput) {
        fieldError(name, "Enter a whole number.");
        input.focus();
        return;
      }
      const v = Number(input.value);
      if (!policy || v !== policy[name]) patch[name] = v;
    }
    if (Object.keys(patch).length === 0) {
      say("policy-msg", "Nothing to change.");
      return;
    }
    $("policy-save").disabled = true;
    try {
      const s = await api("PUT", "/api/cache/persistence", patch);
      policyDirty = false;
      renderSaved(s);
      say("policy-msg", "Policy saved: " + Object.keys(patch).join(", ") + ".", "ok");
    } catch (e) {
      if (e.param && policyInputs[e.param]) {
        fieldError(e.param, e.message);
        $(policyInputs[e.param]).focus();
        say("policy-msg", "Not saved: nothing changed.", "bad");
      } else {
        say("policy-msg", "Not saved: " + e.message, "bad");
      }
    }
    $("policy-save").disabled = false;
  });
  $("saved-purge").addEventListener("click", async () => {
    if (!window.confirm("Delete every saved cache file? Chats will read their history again once.")) return;
    try {
      const r = await api("DELETE", "/api/cache/persistence");
      say("policy-msg", `Deleted ${num(r.deleted_files)} files (${bytes(r.deleted_bytes)}).`, "ok");
    } catch (e) {
      say("policy-msg", "Not deleted: " + e.message, "bad");
    }
    refresh();
  });

  // ---- traffic: rates from /metrics ----

  function parseMetrics(text) {
    const out = {};
    for (const line of text.split("\n")) {
      if (line === "" || line[0] === "#") continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      if (m[2]) continue;  // per-model and per-bucket series: totals are enough here
      out[m[1]] = Number(m[3]);
    }
    return out;
  }
  let prevSample = null;
  const series = { ttft: [], tps: [] };
  function renderTraffic(text) {
    const m = parseMetrics(text);
    const now = performance.now();
    const dl = $("traffic-figures");
    const reused = m.matricxon_prompt_tokens_reused_total || 0;
    const read = m.matricxon_prompt_tokens_total || 0;
    figure(dl, "reused_share", reused, read + reused > 0 ?
      `${(100 * reused / (read + reused)).toFixed(1)} % (${num(reused)})` : "–");
    if (prevSample) {
      const dt = (now - prevSample.t) / 1000;
      const d = (name) => Math.max(0, (m[name] || 0) - (prevSample.m[name] || 0));
      const rps = d("matricxon_requests_total") / dt;
      const tps = d("matricxon_tokens_generated_total") / dt;
      const n = d("matricxon_time_to_first_token_seconds_count");
      const ttft = n > 0 ? 1000 * d("matricxon_time_to_first_token_seconds_sum") / n : null;
      figure(dl, "requests_per_s", rps.toFixed(2), rps.toFixed(1) + " /s");
      figure(dl, "tokens_per_s", tps.toFixed(2), tps.toFixed(1) + " tokens/s");
      if (ttft !== null) figure(dl, "ttft_ms", ttft.toFixed(1), ttft.toFixed(0) + " ms");
      series.ttft.push(ttft);
      series.tps.push(tps);
      for (const s of Object.values(series)) while (s.length > CHART_POINTS) s.shift();
      drawChart();
    }
    prevSample = { t: now, m };
  }
  // One path per series, each scaled to its own peak; a gap where a series
  // has no value (no reply started in that interval).
  function pathOf(values, peak) {
    let d = "";
    const start = CHART_POINTS - values.length;  // the newest sample at the right edge
    values.forEach((v, i) => {
      if (v === null) return;
      const x = (600 * (start + i) / (CHART_POINTS - 1)).toFixed(1);
      const y = (170 - 160 * v / peak).toFixed(1);
      const joined = i > 0 && values[i - 1] !== null;
      const alone = !joined && (i + 1 === values.length || values[i + 1] === null);
      d += (joined ? " L" : " M") + x + " " + y + (alone ? " h1" : "");  // a lone sample: a dot
    });
    return d.trim();
  }
  function drawChart() {
    const peak = (xs) => Math.max(...xs.filter((v) => v !== null), 0);
    const pt = peak(series.ttft), pp = peak(series.tps);
    $("chart-ttft").setAttribute("d", pathOf(series.ttft, pt || 1));
    $("chart-tps").setAttribute("d", pathOf(series.tps, pp || 1));
    $("chart-ttft-max").textContent = pt ? pt.toFixed(0) + " ms" : "–";
    $("chart-tps-max").textContent = pp ? pp.toFixed(1) : "–";
  }

  // ---- cache events ----

  let lastSeq = 0;
  function renderEvents(page) {
    const list = $("events");
    for (const e of page.events) {
      if (e.seq <= lastSeq) continue;
      const time = new Date(e.time_unix_ms).toLocaleTimeString("en-GB", { hour12: false });
      list.prepend(el("li", { dataset: { seq: e.seq, source: e.source, cached: e.cached_tokens,
        prompt: e.prompt_tokens } },
        el("span", { class: "time" }, time),
        el("span", { class: "model" }, e.model + (e.tenant ? " · " + e.tenant : "")),
        el("span", { class: "src " + e.source }, e.source === "none" ? "read all" : e.source),
        el("span", { class: "line" }, e.line)));
      lastSeq = e.seq;
    }
    while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
    lastSeq = Math.max(lastSeq, page.last_seq);
    say("events-msg", list.children.length === 0 ? "No request yet." : "");
  }

  // ---- chat ----

  let chat = [];           // [{role, content}]
  let chatAbort = null;
  function renderModelChoice(list) {
    const select = $("chat-model");
    const names = list.map((m) => m.name);
    if (!changed("chat-models", names)) return;
    const keep = select.value;
    select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
    if (names.includes(keep)) select.value = keep;
  }
  function turnView(role, text) {
    const body = el("div", { class: "text" }, text);
    const usage = el("div", { class: "usage" });
    const turn = el("div", { class: "turn " + role }, el("div", { class: "who" }, role), body, usage);
    $("chat-log").append(turn);
    return { turn, body, usage };
  }
  function showUsage(view, usage, timings) {
    const cached = usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : 0;
    Object.assign(view.usage.dataset, { cached, prompt: usage.prompt_tokens, completion: usage.completion_tokens });
    const parts = [`prompt ${num(usage.prompt_tokens)} tokens, `, el("strong", {}, `${num(cached)} cached`),
      `, ${num(usage.completion_tokens)} generated`];
    if (timings) {
      parts.push(` · read ${num(timings.prompt_n)} in ${timings.prompt_ms.toFixed(0)} ms`);
      if (timings.predicted_per_second) parts.push(`, ${timings.predicted_per_second.toFixed(1)} tokens/s`);
    }
    view.usage.replaceChildren(...parts);
  }
  // Reads an SSE body: calls onData with each event's JSON (or "[DONE]").
  async function readSse(res, onData) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of block.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          onData(data === "[DONE]" ? data : JSON.parse(data));
        }
      }
    }
  }
  async function sendChat() {
    const input = $("chat-input");
    const text = input.value.trim();
    const model = $("chat-model").value;
    if (!text) { say("chat-msg", "Write a message first.", "bad"); input.focus(); return; }
    if (!model) { say("chat-msg", "No model to talk to.", "bad"); return; }
    input.value = "";
    chat.push({ role: "user", content: text });
    turnView("user", text);
    const view = turnView("assistant", "");
    view.turn.setAttribute("aria-busy", "true");
    const headers = { "Content-Type": "application/json" };
    const key = $("chat-key").value.trim();
    if (key) headers.Authorization = "Bearer " + key;
    const body = { model, messages: chat, stream: true, stream_options: { include_usage: true },
      max_tokens: Math.max(1, Number($("chat-max").value) || 64) };
    const temperature = Number($("chat-temp").value);
    if ($("chat-temp").value !== "" && temperature >= 0 && temperature <= 2) body.temperature = temperature;
    chatAbort = new AbortController();
    $("chat-send").disabled = true;
    $("chat-stop").disabled = false;
    say("chat-msg", "");
    let reply = "";
    try {
      const res = await fetch("/v1/chat/completions", { method: "POST", headers, body: JSON.stringify(body),
        signal: chatAbort.signal, cache: "no-store" });
      if (!res.ok) {
        let message = "HTTP " + res.status;
        try { message = (await res.json()).error.message; } catch (_) { /* keep the status */ }
        throw new Error(message);
      }
      await readSse(res, (data) => {
        if (data === "[DONE]") return;
        if (data.error) throw new Error(data.error.message);
        for (const c of data.choices || []) {
          if (c.delta && c.delta.content) {
            reply += c.delta.content;
            view.body.textContent = reply;
          }
        }
        if (data.usage) showUsage(view, data.usage, data.timings);
      });
      if (!reply) view.body.textContent = "(the reply was empty)";
      chat.push({ role: "assistant", content: reply });
    } catch (e) {
      chat.pop();  // the turn did not happen: the next one starts from the chat before it
      view.turn.remove();
      say("chat-msg", e.name === "AbortError" ? "Stopped." : "Chat failed: " + e.message, "bad");
    }
    view.turn.removeAttribute("aria-busy");
    $("chat-log").scrollTop = $("chat-log").scrollHeight;
    chatAbort = null;
    $("chat-send").disabled = false;
    $("chat-stop").disabled = true;
    refresh();
  }
  $("chat-form").addEventListener("submit", (ev) => { ev.preventDefault(); sendChat(); });
  $("chat-input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      if (!$("chat-send").disabled) sendChat();
    }
  });
  $("chat-stop").addEventListener("click", () => { if (chatAbort) chatAbort.abort(); });
  $("chat-new").addEventListener("click", () => {
    if (chatAbort) chatAbort.abort();
    chat = [];
    $("chat-log").replaceChildren();
    say("chat-msg", "New chat.");
  });

  // ---- polling ----

  let refreshes = 0;
  // A failed poll says so in its section's message line; the next good poll
  // clears only what a poll wrote there, never the result of an action.
  const pollFailed = {};
  async function section(msgId, work) {
    try {
      await work();
      if (pollFailed[msgId]) say(msgId, "");
      pollFailed[msgId] = false;
    } catch (e) {
      say(msgId, e.message, "bad");
      pollFailed[msgId] = true;
      throw e;
    }
  }
  let running = null;
  function refresh() {
    if (running) return running;
    running = (async () => {
      const results = await Promise.allSettled([
        section("models-msg", async () => {
          const r = await api("GET", "/api/models");
          if (changed("models", r.models)) renderModels(r.models);
        }),
        section("pools-msg", async () => {
          const r = await api("GET", "/api/cache");
          // Last-used times move every poll; redraw at most when the pool changed.
          if (changed("pools", r.models)) renderPools(r.models);
        }),
        section("policy-msg", async () => renderSaved(await api("GET", "/api/cache/persistence"))),
        section("traffic-msg", async () => renderTraffic(await api("GET", "/metrics"))),
        section("events-msg", async () =>
          renderEvents(await api("GET", `/api/cache/events?since=${lastSeq}&limit=${MAX_EVENTS}`))),
      ]);
      const up = results.some((r) => r.status === "fulfilled");
      // The build, once (a restarted server may be another build: asked again after "unreachable").
      if (up && !$("version").dataset.version) {
        try {
          const h = await api("GET", "/health");
          $("version").dataset.version = h.version;
          $("version").textContent = `v${h.version} · ${h.commit} · ${h.kernels}`;
          $("version").title = `matricxon ${h.version}, commit ${h.commit}, ${h.build_type} build; ` +
            `kernels ${h.kernels} (${(h.cpu_features || []).join(" ") || "no SIMD"})`;
        } catch (_) { /* the next poll asks again */ }
      }
      if (!up) delete $("version").dataset.version;
      $("health").textContent = up ? "up" : "unreachable";
      $("health").className = "pill " + (up ? "ok" : "bad");
      document.body.dataset.refreshes = String(++refreshes);
      running = null;
    })();
    return running;
  }
  function tick() {
    const next = () => setTimeout(tick, POLL_MS);
    if (document.hidden) return next();
    refresh().finally(next);
  }
  tick();
})();
