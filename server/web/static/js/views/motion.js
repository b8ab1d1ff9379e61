// How the table moves between two STATEs the server sent: a removed card flies to the waste,
// a drawn card turns over from the stock onto the waste, an undo sends the card back (to its
// place in the peaks, or to the stock), a cleared peak glows for a moment, and a won game
// lights up the table. The move is worked out from the two STATEs alone (the server stays the
// authority: the table already shows the new STATE, the animation only eases the way there)
// and never holds the player up: nothing waits for an animation, and a new STATE cuts the
// running one short. With "reduce motion" asked for by the system nothing is animated: the
// moments are only shown (and said to a screen reader).
import { clearedPeaks } from "../rules.js";

/** How long a card's move takes, in ms (a short, readable glide). */
export const MOVE_MS = 200;
/** How long a cleared peak and a won table stay highlighted, in ms. */
export const MOMENT_MS = 1400;

const reduced = window.matchMedia("(prefers-reduced-motion: reduce)");

/** Whether the system asks for reduced motion (checked at each move: it may change). */
export function reducedMotion() {
  return reduced.matches;
}

/**
 * What changed from `before` to `game` (two STATEs of the same game, one action apart), in the
 * table's terms, or null (another game, the same STATE, or a jump no one action explains):
 * {kind: "remove", pos} (the card at pos went to the waste), {kind: "draw"}, {kind:
 * "undoRemove", pos} (the card came back to pos), {kind: "undoDraw"}; and `peaks`: the peaks
 * (0 left, 1 middle, 2 right) this STATE cleared, `won`: whether it won the game.
 */
export function changeBetween(before, game) {
  if (!before || !game || before.game_id !== game.game_id || before.seq === game.seq) return null;
  const removed = [];
  const restored = [];
  for (let pos = 0; pos < game.tableau.length; pos++) {
    const was = before.tableau[pos];
    const now = game.tableau[pos];
    if (was !== null && was !== "down" && now === null) removed.push(pos);
    if (was === null && now !== null) restored.push(pos);
  }
  let move = null;
  if (removed.length === 1 && !restored.length && game.waste === before.tableau[removed[0]]) {
    move = { kind: "remove", pos: removed[0] };
  } else if (restored.length === 1 && !removed.length) {
    move = { kind: "undoRemove", pos: restored[0] };
  } else if (!removed.length && !restored.length && game.stock_count === before.stock_count - 1) {
    move = { kind: "draw" };
  } else if (!removed.length && !restored.length && game.stock_count === before.stock_count + 1) {
    move = { kind: "undoDraw" };
  }
  const had = new Set(clearedPeaks(before));
  const peaks = move && move.kind === "remove" ? clearedPeaks(game).filter((i) => !had.has(i)) : [];
  const won = game.status === "won" && before.status === "playing";
  return move || peaks.length || won ? { ...(move || { kind: null }), peaks, won } : null;
}

const running = new Map(); // element → its Animation

/**
 * Move `el` from where `from` (a DOMRect taken before the STATE was drawn) was to where it is
 * now. `turn`: the card turns over on the way (a draw). Any move `el` was still making ends.
 */
export function glide(el, from, { turn = false } = {}) {
  stop(el);
  if (reducedMotion() || !from || el.hidden) return null;
  const to = el.getBoundingClientRect();
  if (!to.width || !to.height) return null;
  const dx = from.left - to.left;
  const dy = from.top - to.top;
  const sx = from.width / to.width;
  const sy = from.height / to.height;
  const start = `translate(${dx}px, ${dy}px) scale(${sx}, ${sy})`;
  const frames = turn
    ? [
        { transform: `${start} scaleX(0.05)` },
        { transform: `translate(${dx * 0.45}px, ${dy * 0.45}px) scaleX(1)`, offset: 0.5 },
        { transform: "none" },
      ]
    : [{ transform: start }, { transform: "none" }];
  el.classList.add("moving");
  const animation = el.animate(frames, { duration: MOVE_MS, easing: "cubic-bezier(0.2, 0.7, 0.3, 1)" });
  running.set(el, animation);
  const done = () => {
    if (running.get(el) === animation) {
      running.delete(el);
      el.classList.remove("moving");
    }
  };
  animation.addEventListener("finish", done);
  animation.addEventListener("cancel", done);
  return animation;
}

/** End the move `el` is making (it is shown where it is). */
export function stop(el) {
  const animation = running.get(el);
  if (animation) animation.cancel();
}

/**
 * Show a moment on `el` (a cleared peak's glow, the won table): the class `cls` for MOMENT_MS,
 * animated by the style sheet unless motion is reduced (then it is shown still).
 */
export function moment(el, cls) {
  el.classList.remove(cls);
  clearTimeout(el._momentTimer);
  void el.offsetWidth; // start the animation again
  el.classList.add(cls);
  el._momentTimer = setTimeout(() => el.classList.remove(cls), MOMENT_MS);
}
