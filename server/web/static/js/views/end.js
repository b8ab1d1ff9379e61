// The panel under an ended game: how it ended, its summary and par (asked of the server once
// per game), its code with a copy button (free play), and what next: undo a blocked free game,
// replay its code, a new deal, the day's leaderboard, the menu. A race game's panel only says
// whether the race runs on: its results are the race panel's (views/race-panel.js). The panel
// can be put aside to look at the final table (its × button or Escape) and brought back ("Show
// the result" beside the table's buttons).
import { api } from "../api.js";
import { codeText, copyControl } from "../code.js";
import { $, h } from "../dom.js";
import { formatTime, locale, t, tNodes } from "../i18n.js";
import { store } from "../store.js";
import { initDailyEnd, renderDailyEnd } from "./daily-end.js";
import { announce } from "./notices.js";

let on = null;
let dismissed = null; // the game id whose panel the player put aside

/** @param {object} handlers  {act(kind), startGame(message), goHome(), openLeaderboard(date)} */
export function initEndPanel(handlers) {
  on = handlers;
  initDailyEnd();
  $("#end-close").addEventListener("click", () => dismiss());
  $("#btn-show-end").addEventListener("click", () => bringBack());
  document.addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape" || ev.defaultPrevented || store.view !== "play" || $("#end-panel").hidden) return;
    if (!$("#settings").hidden) return; // Escape closes the settings first
    ev.preventDefault();
    dismiss();
  });
}

/** Put the panel aside: the final table shows, and "Show the result" brings the panel back. */
function dismiss() {
  if (!store.game) return;
  dismissed = store.game.game_id;
  $("#end-panel").hidden = true;
  renderDailyEnd(store.game);
  const again = $("#btn-show-end");
  again.hidden = false;
  again.focus();
}

function bringBack() {
  dismissed = null;
  $("#btn-show-end").hidden = true;
  refreshEnd();
  const first = $("#end-actions button") || $("#end-close");
  first.focus();
}

/** Show the panel for `game` (hidden while it is played); `before`: the STATE shown before. */
export function renderEnd(game, before) {
  const panel = $("#end-panel");
  if (game.status === "playing" || dismissed !== game.game_id) dismissed = null;
  $("#btn-show-end").hidden = dismissed === null;
  if (game.status === "playing") {
    panel.hidden = true;
    renderDailyEnd(game);
    return;
  }
  const titles = {
    won: t("end.won.title"),
    blocked: game.message || t("end.blocked.title"),
    resigned: t("end.resigned.title"),
  };
  $("#end-title").textContent = titles[game.status] || "";
  // Undos are counted in free play only: a ranked game takes none (one stored before may have).
  const summaryKey = game.mode === "free" || game.undos ? "end.summary" : "end.summaryRanked";
  $("#end-summary").textContent = t(summaryKey, {
    score: game.score,
    moves: game.moves,
    undos: game.undos,
    time: formatTime(game.elapsed_ms),
  });
  renderPar(game);
  const copy = $("#end-copy");
  const codeKey = game.mode === "free" && game.code ? `${game.code}|${locale()}` : "";
  // The code's line is built once per code and language (a "Copied" confirmation stays put).
  if (!codeKey || copy.dataset.key !== codeKey) {
    let note = [];
    copy.textContent = "";
    if (game.mode === "daily") note = [game.status === "resigned" ? t("end.dailyResigned") : t("end.daily", { date: game.daily_date })];
    else if (game.mode === "race") note = [store.race && store.race.room.status === "running" ? t("end.raceWait") : ""];
    else if (codeKey) {
      const code = codeText(game.code, { id: "end-code" });
      note = tNodes("end.code", { code });
      copy.append(copyControl(game.code, code, { id: "end-copy-code" }));
    }
    $("#end-note").replaceChildren(...note);
    copy.dataset.key = codeKey;
    copy.hidden = !codeKey;
  }
  const actions = $("#end-actions");
  actions.textContent = "";
  const button = (label, fn, cls) => h("button", { type: "button", class: cls || null, onclick: fn }, label);
  if (game.mode === "free") {
    if (game.status === "blocked" && game.can_undo) actions.append(button(t("end.undo"), () => on.act("undo"), "primary"));
    if (game.code) actions.append(button(t("end.replay"), () => on.startGame({ type: "new_game", code: game.code })));
    actions.append(button(t("end.newRandom"), () => on.startGame({ type: "new_game", rules: game.rules })));
    actions.append(button(t("end.menu"), on.goHome));
  } else if (game.mode === "daily") {
    actions.append(button(t("end.leaderboard"), () => on.openLeaderboard(game.daily_date), "primary"));
    actions.append(button(t("end.menu"), on.goHome));
  }
  const wasPlaying = !before || before.game_id !== game.game_id || before.status === "playing";
  panel.hidden = dismissed !== null;
  renderDailyEnd(game);
  if (dismissed !== null) return;
  if (wasPlaying && before && before.game_id === game.game_id) {
    const first = actions.querySelector("button");
    if (first) first.focus();
    announce(`${$("#end-title").textContent}. ${$("#end-summary").textContent}`);
  }
}

/** Show the panel again for the game on the table (its race's state changed). */
export function refreshEnd() {
  if (store.game && store.view === "play") renderEnd(store.game, store.game);
}

/**
 * "Par 752 · your score 650 (86%)" under the summary of an ended free or daily game, and a
 * sentence saying what par is and how the score compares with it.
 */
function renderPar(game) {
  const el = $("#end-par");
  const explain = $("#end-par-explain");
  const known = store.par[game.game_id];
  if (game.mode === "race" || game.status === "playing" || !known) {
    el.hidden = true;
    el.textContent = "";
    explain.hidden = true;
    explain.textContent = "";
    if (game.mode !== "race" && game.status !== "playing" && known === undefined) loadPar(game);
    return;
  }
  // The share is the server's par_share (score / par), worked out for the score shown.
  const share = game.score / known.par;
  el.textContent = Number.isFinite(share)
    ? t("end.par", { par: known.par, score: game.score, share: Math.round(share * 100) })
    : t("end.parOnly", { par: known.par });
  el.hidden = false;
  const diff = known.par - game.score;
  explain.textContent =
    diff <= 0 ? t("table.parAtBest") : t("table.parBelow", { score: game.score, diff });
  explain.hidden = false;
}

const parLoading = new Set();

async function loadPar(game) {
  if (parLoading.has(game.game_id)) return;
  parLoading.add(game.game_id);
  let par = null;
  try {
    const summary = await api.game(game.game_id, store.token);
    if (summary.hinted) store.hinted.add(game.game_id);
    if (typeof summary.par === "number" && summary.par > 0) {
      par = summary.par;
    }
  } catch (err) {
    /* no summary: try the daily's par below */
  }
  if (par === null && game.mode === "daily" && game.daily_date) {
    try {
      let dayPar = store.dailyPar[game.daily_date];
      if (dayPar === undefined) {
        const daily = await api.daily(game.daily_date);
        dayPar = daily.par;
        if (typeof dayPar === "number") store.dailyPar[game.daily_date] = dayPar;
      }
      if (typeof dayPar === "number" && dayPar > 0) {
        par = dayPar;
      }
    } catch (err) {
      /* no par today */
    }
  }
  store.par[game.game_id] = par === null ? null : { par };
  const now = store.game;
  if (now && now.game_id === game.game_id && now.status !== "playing") renderPar(now);
}

