"""Run a review's questions through the real REST app and print the answers for a reader.

The questions file (tests/data/review/round*_questions.txt): questions separated by a blank line;
a question's first line is the user's text; a line `LOG: ...` (newlines written as `\\n`) is the
error log pasted with the turn above it; a line `+ ...` is a follow-up turn of the same
conversation (sent with the first turn's `conversation_id`).

    OOMKB_HOME=.oomkb/test-home .venv/bin/python benchmarks/review_run.py questions.txt [-v]

Prints, per turn, the question, the answer's language and whether it was grounded, then the
answer as a user sees it (`-v`: with the citations and next steps too). Exits 1 when a turn got
an HTTP error (the rest still run).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Turn:
    question: str
    error_log: str | None = None


@dataclass
class Question:
    turns: list[Turn] = field(default_factory=list)


def read_questions(path: Path) -> list[Question]:
    out: list[Question] = []
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        q = Question()
        for ln in lines:
            if ln.startswith("LOG: "):
                if not q.turns:
                    q.turns.append(Turn(""))
                q.turns[-1].error_log = ln[len("LOG: "):].replace("\\n", "\n").replace("\\t", "\t")
            elif ln.startswith("+ "):
                q.turns.append(Turn(ln[2:].strip()))
            else:
                q.turns.append(Turn(ln.strip()))
        out.append(q)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("-v", "--verbose", action="store_true", help="citations and next steps too")
    args = ap.parse_args()

    from fastapi.testclient import TestClient

    from oomkb.api.http.app import create_app

    failed = False
    with TestClient(create_app(), base_url="http://127.0.0.1") as client:
        deadline = time.monotonic() + 600  # the model and the index load in the background
        while (ready := client.get("/readyz")).status_code != 200:
            if ready.json().get("status") == "failed":  # loading failed (a catalogue that does not load)
                sys.exit(f"the service failed to start: {ready.json().get('detail')}")
            if time.monotonic() > deadline:
                sys.exit("the service did not become ready in 10 minutes")
            time.sleep(0.5)
        for qn, q in enumerate(read_questions(args.questions), 1):
            conversation = None
            for tn, turn in enumerate(q.turns, 1):
                body: dict = {"question": turn.question}
                if turn.error_log:
                    body["error_log"] = turn.error_log
                if conversation:
                    body["conversation_id"] = conversation
                r = client.post("/v1/ask", json=body)
                print(f"{'=' * 24} Q{qn} turn {tn} {'=' * 24}")
                print(f"USER: {turn.question}")
                if turn.error_log:
                    print(f"(log pasted: {len(turn.error_log)} characters)")
                if r.status_code != 200:
                    failed = True
                    print(f"HTTP {r.status_code}: {r.text}\n")
                    continue
                a = r.json()
                conversation = a.get("conversation_id") or conversation
                print(f"[language={a['language']} grounded={a['grounded']} "
                      f"follow_up={a.get('follow_up')} out_of_scope={a.get('out_of_scope')}]")
                print(a["answer"])
                if args.verbose:
                    for c in a.get("citations", []):
                        # (the section's title is in the answer's Sources, in the reader's language; the
                        # field's title is the guide's own, in the guide's language)
                        print(f"  cite: {c.get('citation')}")
                    for s in a.get("next_steps", []):
                        print(f"  next: {s.get('command') or s}")
                print()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
