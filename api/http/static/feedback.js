// 👍/👎 and a comment on the answer shown (POST /v1/feedback with its answer_id).
"use strict";
(function () {
  let answerId = null;
  const $ = (id) => document.getElementById(id);

  function status(text) {
    $("feedback-status").textContent = text;
  }

  async function send(helpful) {
    if (!answerId) return;
    const body = { answer_id: answerId, helpful };
    const comment = $("feedback-comment").value.trim();
    if (comment) body.comment = comment.slice(0, 4000);
    status("Sending…");
    try {
      const response = await fetch("/v1/feedback", {
        method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
      });
      const data = await response.json().catch(() => ({}));
      if (!response.ok) {
        status(typeof data.detail === "string" ? data.detail : "Feedback could not be sent (" + response.status + ").");
        return;
      }
      status(helpful ? "Thanks: marked helpful." : "Thanks: marked not helpful.");
      $("feedback").dataset.sent = helpful ? "up" : "down";
    } catch (err) {
      status("Feedback could not be sent: " + err.message);
    }
  }

  document.addEventListener("oomkb:answer", (event) => {
    answerId = event.detail && event.detail.answer_id;
    $("feedback-comment").value = "";
    delete $("feedback").dataset.sent;
    status("");
    $("feedback").hidden = !answerId;
  });

  document.addEventListener("DOMContentLoaded", () => {
    $("feedback-up").addEventListener("click", () => send(true));
    $("feedback-down").addEventListener("click", () => send(false));
  });
})();
