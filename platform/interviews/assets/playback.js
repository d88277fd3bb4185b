// Scorecard playback: the pad's keystroke history replayed like a video, with who typed
// what, and a marker for every run and hint reveal on the same time line.
//
// The history is CodeMirror ChangeSet JSON per update (retain counts and
// [deleted, ...inserted lines]), applied here on plain strings: JavaScript strings count
// UTF-16 units exactly as the editor did.
const KEYFRAME_EVERY = 100;
const IDLE_GAP_MS = 2000; // longer pauses play as this long (like CodeSignal, idle is skipped)
const TICK_MS = 50;

function applyChanges(text, changes) {
  let out = "", pos = 0, insertedAt = -1, insertedLength = 0;
  for (const part of changes) {
    if (typeof part === "number") { out += text.slice(pos, pos + part); pos += part; continue; }
    const inserted = part.slice(1).join("\n");
    if (inserted && insertedAt < 0) { insertedAt = out.length; insertedLength = inserted.length; }
    out += inserted;
    pos += part[0];
  }
  return { text: out, insertedAt, insertedLength };
}

function clock(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  return `${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

async function setup(root) {
  const data = await (await fetch(root.dataset.url, { credentials: "same-origin" })).json();
  const updates = data.updates; // [t_ms, role, author, changes]
  const code = root.querySelector(".playback-code");
  const scrub = root.querySelector(".playback-scrub");
  const play = root.querySelector(".playback-play");
  const speed = root.querySelector(".playback-speed");
  const when = root.querySelector(".playback-time");
  const who = root.querySelector(".playback-who");
  const markers = root.querySelector(".playback-markers");

  // Play time: real time with long idle gaps shortened, so scrubbing and markers agree.
  const playT = [];
  let last = 0, acc = 0;
  for (const u of updates) { acc += Math.min(u[0] - last, IDLE_GAP_MS); last = u[0]; playT.push(acc); }

  const keyframes = [data.base];
  let text = data.base;
  for (let i = 0; i < updates.length; i++) {
    text = applyChanges(text, updates[i][3]).text;
    if ((i + 1) % KEYFRAME_EVERY === 0) keyframes.push(text);
  }

  scrub.max = String(updates.length);
  scrub.value = String(updates.length);
  let index = updates.length, now = playT.length ? playT[playT.length - 1] : 0, timer = null;

  function textAt(n) {
    const k = Math.floor(n / KEYFRAME_EVERY);
    let t = keyframes[k], last = null;
    for (let i = k * KEYFRAME_EVERY; i < n; i++) { last = applyChanges(t, updates[i][3]); t = last.text; }
    return { text: t, last };
  }

  function render() {
    const { text: t, last: change } = textAt(index);
    code.textContent = "";
    const u = index > 0 ? updates[index - 1] : null;
    if (change && change.insertedAt >= 0 && u) {
      const mark = el("mark", `typed-by-${u[1]}`, t.slice(change.insertedAt, change.insertedAt + change.insertedLength));
      mark.title = `typed by ${u[2]}`;
      code.append(t.slice(0, change.insertedAt), mark, t.slice(change.insertedAt + change.insertedLength));
      code.scrollTop = Math.max(0, mark.offsetTop - code.clientHeight / 2);
    } else {
      code.textContent = t;
    }
    scrub.value = String(index);
    when.textContent = u ? clock(u[0]) : "00:00";
    who.textContent = u ? `${u[2]} (${u[1]})` : "the starter code";
    who.className = `playback-who badge ${u ? "typed-by-" + u[1] : ""}`;
  }

  function seekIndex(n) { index = Math.max(0, Math.min(updates.length, n)); now = index ? playT[index - 1] : 0; render(); }
  function stop() { if (timer) clearInterval(timer); timer = null; play.textContent = "▶ Play"; play.setAttribute("aria-pressed", "false"); }
  function start() {
    if (index >= updates.length) seekIndex(0);
    play.textContent = "❚❚ Pause";
    play.setAttribute("aria-pressed", "true");
    timer = setInterval(() => {
      now += TICK_MS * Number(speed.value);
      let n = index;
      while (n < updates.length && playT[n] <= now) n++;
      if (n !== index) { index = n; render(); }
      if (index >= updates.length) stop();
    }, TICK_MS);
  }

  play.addEventListener("click", () => (timer ? stop() : start()));
  scrub.addEventListener("input", () => { stop(); seekIndex(Number(scrub.value)); });
  for (const m of data.markers) {
    const item = el("li");
    const button = el("button", `outline small marker marker-${m.kind}`, `${clock(m.t)} · ${m.label}`);
    button.type = "button";
    button.addEventListener("click", () => {
      stop();
      let n = 0;
      while (n < updates.length && updates[n][0] <= m.t) n++;
      seekIndex(n);
      const target = m.anchor && document.getElementById(m.anchor);
      if (target && target.tagName === "DETAILS") target.open = true;
    });
    item.appendChild(button);
    markers.appendChild(item);
  }
  root.dataset.ready = "true";
  render();
}

document.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("playback");
  if (root) setup(root);
});
