// Live updates by polling: every few seconds, fetch this page again and swap in its <main>.
// Plain fetch, no library; paused while the tab is hidden. Forms outside <main> (filters) keep
// what the user is typing.
(function () {
  const main = document.getElementById("live");
  const every = main && Number(main.dataset.refreshMs);
  if (!every) return;
  async function refresh() {
    if (!document.hidden) {
      try {
        const response = await fetch(location.href, { credentials: "same-origin" });
        if (response.ok && !response.redirected) {
          const page = new DOMParser().parseFromString(await response.text(), "text/html");
          const fresh = page.getElementById("live");
          if (fresh) main.innerHTML = fresh.innerHTML;
          if (fresh && !fresh.dataset.refreshMs) return; // the page is final now (a finished review)
        }
      } catch (e) {
        // the server is restarting or unreachable: keep the last view and try again
      }
    }
    setTimeout(refresh, every);
  }
  setTimeout(refresh, every);
})();
