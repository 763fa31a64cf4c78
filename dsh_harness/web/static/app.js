// Session page: load older pages on demand and follow a running session by polling for
// events newer than the last one shown. The server renders (and escapes) every fragment.
(function () {
  const box = document.getElementById("events");
  if (!box) return;
  const more = document.getElementById("more");
  const id = box.dataset.session;
  let last = Number(box.dataset.lastSeq || 0);
  let busy = false;

  async function fetchAfter() {
    const url = "/fragments/events?id=" + encodeURIComponent(id) + "&after=" + last;
    const resp = await fetch(url, { credentials: "same-origin" });
    if (resp.status !== 200) return { more: false };
    box.insertAdjacentHTML("beforeend", await resp.text());
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
  }

  if (more) more.addEventListener("click", () => step(true));
  setInterval(() => { if (more && !more.hidden) return; step(false); }, 2000);
})();
