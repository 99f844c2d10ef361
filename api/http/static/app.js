// oomkb web page: ask (question + optional error log) and search, over the service's REST API.
// Everything the server or the user wrote is put into the page as text nodes (never innerHTML);
// the small Markdown subset of the answers (headings, bold, italics, lists, quotes, code) is
// turned into elements here.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------------ Markdown → DOM (safe)

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const child of children || []) {
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  const INLINE = /(`+)([\s\S]+?)\1|\*\*(?=\S)([\s\S]+?)\*\*|__(?=\S)([\s\S]+?)__|(?<![\w*])\*(?=\S)([^*]+?)\*(?![\w*])|(?<![\w_])_(?=\S)([^_]+?)_(?![\w_])/g;

  // Inline spans of one line as nodes: code, bold, italics; the rest is text.
  function inline(text) {
    const out = [];
    let pos = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > pos) out.push(text.slice(pos, m.index));
      if (m[2] !== undefined) out.push(el("code", {}, [m[2]]));
      else if (m[3] !== undefined || m[4] !== undefined) out.push(el("strong", {}, inline(m[3] ?? m[4])));
      else out.push(el("em", {}, inline(m[5] ?? m[6])));
      pos = m.index + m[0].length;
    }
    if (pos < text.length) out.push(text.slice(pos));
    return out;
  }

  // A fragment for a Markdown text: paragraphs, ### headings, lists, > quotes, ``` code.
  const SOURCE_LANGUAGE = /\(`[^`]+`, ([a-z]{2,3})\)\s*$/;
  const ORIGINAL_MARK = "\u21b3";  // "↳": the line that labels a guide's original wording

  function renderMarkdown(markdown) {
    const frag = document.createDocumentFragment();
    const lines = String(markdown || "").split("\n");
    let i = 0;
    let quoteLanguage = null;  // a source line "(`doc#section`, pt)" names its quote's language
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (/^\s*(```|~~~)/.test(line)) {
        const code = [];
        i++;
        while (i < lines.length && !/^\s*(```|~~~)/.test(lines[i])) code.push(lines[i++]);
        i++;
        frag.append(el("pre", { dir: "ltr" }, [el("code", {}, [code.join("\n")])]));
      } else if ((m = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line))) {
        const level = Math.min(6, Math.max(3, m[1].length + 1));
        frag.append(el("h" + level, { dir: "auto" }, inline(m[2])));
        i++;
      } else if (line.startsWith(ORIGINAL_MARK)) {
        // "↳ _The guide's original wording (Chinese)_ (`doc#section`, zh)" and the quote under it:
        // the source of the translated passage above, collapsed.
        const source = SOURCE_LANGUAGE.exec(line);
        const label = line.slice(ORIGINAL_MARK.length).replace(SOURCE_LANGUAGE, "").trim();
        i++;
        while (i < lines.length && lines[i].trim() === "") i++;
        const parts = [];
        while (i < lines.length && /^\s{0,3}>/.test(lines[i])) parts.push(lines[i++].replace(/^\s{0,3}>\s?/, ""));
        const quote = el("blockquote", source ? { dir: "auto", lang: source[1] } : { dir: "auto" });
        parts.forEach((p, n) => {
          if (n) quote.append(el("br"));
          quote.append(...inline(p));
        });
        frag.append(el("details", { class: "original" }, [el("summary", { dir: "auto" }, inline(label)), quote]));
      } else if (/^\s{0,3}>/.test(line)) {
        const quote = el("blockquote", quoteLanguage ? { dir: "auto", lang: quoteLanguage } : { dir: "auto" });
        quoteLanguage = null;
        const parts = [];
        while (i < lines.length && /^\s{0,3}>/.test(lines[i])) parts.push(lines[i++].replace(/^\s{0,3}>\s?/, ""));
        parts.forEach((p, n) => {
          if (n) quote.append(el("br"));
          quote.append(...inline(p));
        });
        frag.append(quote);
      } else if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
        const ordered = /^\s*\d+[.)]\s+/.test(line);
        const list = el(ordered ? "ol" : "ul", { dir: "auto" });
        if (ordered) list.setAttribute("start", String(parseInt(line.trim(), 10) || 1));
        while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i])) {
          const source = SOURCE_LANGUAGE.exec(lines[i]);
          quoteLanguage = source ? source[1] : null;
          list.append(el("li", {}, inline(lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ""))));
          i++;
        }
        frag.append(list);
      } else if (line.trim() === "") {
        i++;
      } else {
        const para = [];
        while (i < lines.length && lines[i].trim() !== "" &&
               !/^\s*(```|~~~|#{1,6}\s|>|[-*+]\s|\d+[.)]\s)/.test(lines[i])) para.push(lines[i++]);
        const p = el("p", { dir: "auto" });
        para.forEach((t, n) => {
          if (n) p.append(el("br"));
          p.append(...inline(t));
        });
        frag.append(p);
      }
    }
    return frag;
  }

  // ------------------------------------------------------------------ sizes

  function formatBytes(n) {
    if (n === null || n === undefined) return "";
    const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let value = Math.abs(n);
    let u = 0;
    while (value >= 1024 && u < units.length - 1) { value /= 1024; u++; }
    const shown = u === 0 ? String(value) : value.toFixed(value >= 100 ? 0 : 2);
    return (n < 0 ? "-" : "") + shown + " " + units[u];
  }

  // ------------------------------------------------------------------ API

  async function post(path, body) {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (_) { /* not JSON */ }
    if (!response.ok) {
      const detail = data && typeof data.detail === "string" ? data.detail : response.status + " " + response.statusText;
      throw new Error(detail);
    }
    return data;
  }

  function busy(on, text) {
    $("ask-button").disabled = on;
    $("search-button").disabled = on;
    $("status").textContent = text || "";
  }

  function showError(message) {
    const box = $("error");
    box.textContent = message;
    box.hidden = !message;
  }

  // ------------------------------------------------------------------ rendering

  function showDiagnosis(diagnosis) {
    const panel = $("diagnosis");
    const figures = $("diagnosis-figures");
    figures.replaceChildren();
    if (!diagnosis) { panel.hidden = true; return; }
    $("diagnosis-category").textContent = diagnosis.category;
    const rows = [["backend", diagnosis.backend], ["memory space", diagnosis.memory_space]];
    for (const [key, value] of Object.entries(diagnosis)) {
      if (key.endsWith("_bytes") && typeof value === "number") {
        rows.push([key.replace(/_bytes$/, "").replace(/_/g, " "), formatBytes(value) + " (" + value + " bytes)"]);
      }
    }
    rows.push(["shape", diagnosis.shape], ["instruction", diagnosis.instruction],
              ["custom call", diagnosis.custom_call_target], ["error code", diagnosis.error_code]);
    for (const [label, value] of rows) {
      if (value === null || value === undefined || value === "") continue;
      figures.append(el("dt", {}, [label]), el("dd", { dir: "ltr" }, [String(value)]));
    }
    panel.hidden = false;
  }

  // Where a guide section is read on this server (the API sends it as `url` with each citation).
  function guideUrl(docId, section) {
    return "/guides/" + encodeURIComponent(docId) + "#" + encodeURIComponent(section);
  }

  // The guides the answer cites, as a compact list of links: their quotes are in the answer's
  // own Sources section already, so none is repeated here.
  function showSources(citations) {
    const list = $("sources-list");
    list.replaceChildren();
    for (const c of citations || []) {
      const cite = c.citation || c.doc_id + "#" + c.section;
      list.append(el("li", { "data-doc-id": c.doc_id }, [
        el("span", { dir: "auto" }, [el("strong", {}, [c.guide_title || c.doc_id]),
                                     c.section_title ? " › " + c.section_title : ""]),
        " ",
        el("span", { class: "cite" }, [el("a", { href: guideUrl(c.doc_id, c.section) },
                                          [el("code", {}, [cite])]), " (" + c.language + ")"]),
      ]));
    }
    $("sources").hidden = list.children.length === 0;
  }

  function showAnswer(data) {
    $("search-results").hidden = true;
    showDiagnosis(data.diagnosis);
    const answer = $("answer");
    answer.setAttribute("lang", data.language);
    answer.replaceChildren(renderMarkdown(data.answer));
    const meta = [data.language, data.grounded ? "grounded in the guides" : "not covered by the guides"];
    if (data.language_note) meta.push(data.language_note);
    if (data.follow_up) meta.push("follow-up");
    answer.dataset.followUp = String(Boolean(data.follow_up));
    $("answer-meta").textContent = "(" + meta.join(" · ") + ")";
    answer.dataset.language = data.language;
    answer.dataset.grounded = String(data.grounded);
    showSources(data.citations);
    $("result").hidden = false;
    document.dispatchEvent(new CustomEvent("oomkb:answer", { detail: data }));
  }

  function showSearch(data) {
    $("result").hidden = true;
    const list = $("search-list");
    list.replaceChildren();
    for (const r of data.results) {
      const item = el("li", { "data-doc-id": r.doc_id }, [
        el("div", { dir: "auto" }, [el("strong", {}, [r.guide_title]), " › " + r.section_title]),
        el("div", { class: "cite" }, [el("a", { href: guideUrl(r.doc_id, r.section) }, [el("code", {}, [r.citation])]),
                                      " (" + r.language + ", score " + r.score.toFixed(4) + ")"]),
      ]);
      if (r.card) {
        item.append(el("p", { dir: "auto", lang: data.query_language }, [r.card.summary || ""]));
      }
      item.append(el("blockquote", { dir: "auto", lang: r.language }, [r.text.slice(0, 600) + (r.text.length > 600 ? "…" : "")]));
      list.append(item);
    }
    $("search-meta").textContent = "(" + data.results.length + " · " + data.query_language + ")";
    $("search-results").hidden = false;
  }

  // ------------------------------------------------------------------ events

  // The conversation so far: the earlier turns, sent as `history` with each question so that a
  // follow-up ("still OOM, what next?") inherits their subject and evidence. Kept in the page
  // only; "New conversation" forgets it. Bounded like the server's (8 turns, the log's tail).
  const MAX_TURNS = 8;
  const MAX_LOG_CHARS = 200000;
  let turns = [];

  function showConversation() {
    const n = turns.length;
    $("conversation-meta").textContent = n ? n + (n === 1 ? " earlier question" : " earlier questions") : "";
    $("new-conversation").hidden = n === 0;
    document.body.dataset.turns = String(n);
  }

  function newConversation() {
    turns = [];
    showConversation();
  }

  async function ask(event) {
    event.preventDefault();
    showError("");
    const body = { question: $("question").value };
    const log = $("error-log").value;
    if (log.trim()) body.error_log = log;
    if (turns.length) body.history = turns.slice();
    if ($("language").value) body.language = $("language").value;
    if (!body.question.trim() && !body.error_log) {
      showError("Write a question or paste an error log.");
      return;
    }
    busy(true, "Thinking…");
    try {
      showAnswer(await post("/v1/ask", body));
      const turn = { question: body.question.slice(0, 20000) };
      if (body.error_log) turn.error_log = body.error_log.slice(-MAX_LOG_CHARS);
      turns = turns.concat([turn]).slice(-MAX_TURNS);
      showConversation();
    } catch (err) {
      showError(err.message);
    } finally {
      busy(false);
    }
  }

  async function search() {
    showError("");
    const query = ($("question").value + "\n" + $("error-log").value).trim();
    if (!query) {
      showError("Write something to search for.");
      return;
    }
    busy(true, "Searching…");
    try {
      showSearch(await post("/v1/search", { query: query.slice(0, 4000), k: 5 }));
    } catch (err) {
      showError(err.message);
    } finally {
      busy(false);
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("ask-form").addEventListener("submit", ask);
    $("search-button").addEventListener("click", search);
    $("new-conversation").addEventListener("click", newConversation);
    showConversation();
    document.body.dataset.ready = "true";
  });

  window.oomkb = { renderMarkdown, formatBytes };
})();
