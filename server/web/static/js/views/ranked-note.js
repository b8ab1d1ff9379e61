// The note that ranked games (the daily challenge, races) have no undo, shown once: before the
// first ranked game this browser plays (docs/rules.md §4 "Ranked play"). It is a modal dialog
// closed with its button or Escape; once closed it is remembered (store.rankedNoteSeen).
import { $ } from "../dom.js";
import { setRankedNoteSeen, store } from "../store.js";

let waiting = []; // resolvers of the callers waiting for the note to be read

export function initRankedNote() {
  const dialog = $("#ranked-note");
  $("#ranked-note-ok").addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => {
    setRankedNoteSeen();
    const done = waiting;
    waiting = [];
    for (const resolve of done) resolve();
  });
}

/**
 * Resolve once the player has read the note: at once when it was read before, else when they
 * close it. Callers await it before asking for a ranked game.
 */
export function rankedNoteRead() {
  if (store.rankedNoteSeen) return Promise.resolve();
  const dialog = $("#ranked-note");
  if (!dialog.open) {
    dialog.showModal();
    $("#ranked-note-ok").focus();
  }
  return new Promise((resolve) => waiting.push(resolve));
}
