// Client-side search of an exported oomkb site: the sections and the knowledge cards in every
// language (window.OOMKB_SEARCH, written by `oomkb export-site`). No network, no external assets.
"use strict";
(function () {
  const records = window.OOMKB_SEARCH || [];
  const input = document.getElementById("site-search");
  const list = document.getElementById("site-results");
  if (!input || !list) return;

  // Words for Latin, Cyrillic, Devanagari, Arabic; character pairs for Han, Kana and Hangul.
  function terms(text) {
    const out = [];
    const lower = text.toLowerCase();
    for (const w of lower.match(/[\p{L}\p{N}_.\-]+/gu) || []) {
      if (/[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u.test(w)) {
        for (let i = 0; i + 1 < w.length; i++) out.push(w.slice(i, i + 2));
        if (w.length === 1) out.push(w);
      } else if (w.length > 1) {
        out.push(w);
      }
    }
    return out;
  }

  const indexed = records.map((r) => ({ r, hay: (r.t + " " + r.x).toLowerCase() }));

  function search(query) {
    const q = terms(query);
    if (!q.length) return [];
    const best = new Map();
    for (const { r, hay } of indexed) {
      let score = 0;
      for (const t of q) if (hay.includes(t)) score += 1 + (r.t.toLowerCase().includes(t) ? 1 : 0);
      if (score > 0 && (!best.has(r.u) || best.get(r.u).score < score)) best.set(r.u, { r, score });
    }
    return [...best.values()].sort((a, b) => b.score - a.score).slice(0, 10);
  }

  input.addEventListener("input", () => {
    list.replaceChildren();
    for (const { r } of search(input.value)) {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = r.u;
      a.textContent = r.t;
      a.lang = r.l;
      a.dir = "auto";
      const where = document.createElement("span");
      where.className = "meta";
      where.textContent = " " + r.u.replace(/^guides\//, "").replace(".html", "");
      li.append(a, where);
      list.append(li);
    }
  });
})();
