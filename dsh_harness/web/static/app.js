// The UI's only script (CSP: script-src 'self'). The server renders and escapes everything;
// this file only moves server-rendered fragments and text around.
(function () {
  // Times: the server writes UTC; show them in the viewer's zone, with the zone's name.
  function localTimes(root) {
    const fmt = new Intl.DateTimeFormat(undefined, {
      year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
      minute: "2-digit", second: "2-digit", timeZoneName: "short" });
    root.querySelectorAll("time[datetime]").forEach((t) => {
      if (t.dataset.local) return;
      const d = new Date(t.getAttribute("datetime"));
      if (isNaN(d)) return;
      t.title = t.textContent;
      t.textContent = fmt.format(d);
      t.dataset.local = "1";
    });
  }
  localTimes(document);

  // Keyboard: "/" focuses the filter; j / k move between rows, turns or review comments.
  document.addEventListener("keydown", (ev) => {
    const tag = (ev.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "/") {
      const q = document.querySelector("input[type=search]");
      if (q) { ev.preventDefault(); q.focus(); }
      return;
    }
    if (ev.key !== "j" && ev.key !== "k") return;
    const stops = Array.from(document.querySelectorAll("a.title, [data-stop]"));
    if (!stops.length) return;
    const at = stops.indexOf(document.activeElement);
    const next = ev.key === "j" ? Math.min(stops.length - 1, at + 1) : Math.max(0, at - 1);
    stops[next].focus();
    ev.preventDefault();
  });

  // Session page: load older pages on demand and follow an open turn until it closes.
  const box = document.getElementById("events");
  if (!box) return;
  const more = document.getElementById("more");
  const totals = document.getElementById("totals");
  const live = document.getElementById("live");
  const id = box.dataset.session;
  let last = Number(box.dataset.lastSeq || 0);
  let open = box.dataset.open === "1";
  let busy = false;
  let timer = null;

  function showTotals(resp) {
    const raw = resp.headers.get("X-Totals");
    if (!raw) return;
    const t = JSON.parse(raw);
    if (totals) totals.textContent = t.turns + (t.turns === 1 ? " turn · " : " turns · ") + t.usage;
    if (live) live.hidden = !t.open;
    open = t.open;
  }

  async function fetchAfter() {
    const url = "/fragments/events?id=" + encodeURIComponent(id) + "&after=" + last;
    const resp = await fetch(url, { credentials: "same-origin" });
    if (resp.status === 200 || resp.status === 204) showTotals(resp);
    if (resp.status !== 200) return { more: false };
    const holder = document.createElement("div");
    holder.innerHTML = await resp.text();
    localTimes(holder);
    while (holder.firstChild) box.appendChild(holder.firstChild);
    last = Number(resp.headers.get("X-Last-Seq") || last);
    return { more: resp.headers.get("X-More") === "1" };
  }

  async function step(showMore) {
    if (busy) return;
    busy = true;
    try {
      const r = await fetchAfter();
      if (showMore && more) more.hidden = !r.more;
    } catch (e) {
      /* the server may be restarting; try again on the next tick */
    } finally {
      busy = false;
    }
    if (!open && timer !== null) {  // the turn closed: nothing more will come
      clearInterval(timer);
      timer = null;
    }
  }

  if (more) more.addEventListener("click", () => step(true));
  if (open) {
    timer = setInterval(() => { if (more && !more.hidden) return; step(false); }, 2000);
  }
})();
