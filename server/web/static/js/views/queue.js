// The waiting view of a quick race (quick.js holds the wait): the rule set, how long the player
// has waited (counted on this page, each second), their rating and the rating gap the server
// accepts now (from the last queue_waiting), and Cancel.
import { $ } from "../dom.js";
import { formatTime, t } from "../i18n.js";
import { store } from "../store.js";

let ticker = null;

/** @param {object} on  {cancel()} */
export function initQueueView(on) {
  $("#queue-cancel").addEventListener("click", () => on.cancel());
}

/** Draw the wait (and keep its elapsed time ticking while the view shows). */
export function renderQueue() {
  const waiting = store.quick;
  clearInterval(ticker);
  if (!waiting) return;
  $("#queue-rules").textContent = t("quick.rules", { rules: t(`rules.short.${waiting.rules}`) });
  const gap = $("#queue-gap");
  gap.textContent = waiting.gap === null ? t("quick.asking") : t("quick.gap", { rating: waiting.rating, gap: waiting.gap });
  const tick = () => {
    if (store.quick !== waiting) return clearInterval(ticker);
    $("#queue-elapsed").textContent = t("quick.elapsed", { time: formatTime(performance.now() - waiting.startedAt) });
  };
  tick();
  ticker = setInterval(tick, 1000);
}
