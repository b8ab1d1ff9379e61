// The menu (the home view): games to continue, today's daily, free play by code or at random,
// a race to see by its invite or to create, the leaderboard, and the player's own profile. It
// draws what the store and the server's daily say and hands the player's choice to the
// handlers of initMenu.
import { api } from "../api.js";
import { codeText } from "../code.js";
import { $, h } from "../dom.js";
import { t, tn, tNodes } from "../i18n.js";
import { raceGames, store } from "../store.js";
import { levelBadge } from "./difficulty.js";
import { codeError, errorText, homeError } from "./notices.js";

let on = null;

/**
 * @param {object} handlers  {startGame(message, options), joinRace(invite), openInvite(invite),
 *   createRace({code, rules, timeLimit}), openLeaderboard(), openProfile(playerId)}
 */
export function initMenu(handlers) {
  on = handlers;
  timeLimitOptions();
  $("#btn-leaderboard").addEventListener("click", () => on.openLeaderboard());
  $("#menu-profile").addEventListener("click", (ev) => {
    ev.preventDefault();
    if (store.player) on.openProfile(store.player.id);
  });
  $("#btn-daily").addEventListener("click", () => on.startGame({ type: "join_daily" }));
  $("#free-code-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const code = $("#free-code").value.trim();
    if (code) on.startGame({ type: "new_game", code }, { field: "free-code" });
    else codeError("free-code", errorText("bad_code"));
  });
  for (const field of ["free-code", "race-code"]) {
    $(`#${field}`).addEventListener("input", () => {
      if ($(`#${field}-error`).textContent) codeError(field, "");
    });
  }
  $("#btn-random").addEventListener("click", () => on.startGame({ type: "new_game", rules: $("#free-rules").value }));
  $("#race-join-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const invite = $("#race-invite").value.trim();
    if (invite) on.openInvite(invite);
    else homeError(errorText("bad_invite"));
  });
  $("#race-create-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const code = $("#race-code").value.trim();
    on.createRace({ code, rules: $("#race-rules").value, timeLimit: Number($("#race-limit").value) });
  });
}

/** Open the "Create a race" form, its code field focused. */
export function openRaceForm() {
  const details = $(".race-create");
  details.open = true;
  $("#race-code").focus();
}

/** Draw the menu: the games to continue, and today's daily (asked of the server). */
export async function renderHome() {
  const games = store.welcomeGames || [];
  const list = $("#continue-list");
  list.textContent = "";
  const races = raceGames();
  for (const g of games) {
    let what = g.code ? codeText(g.code) : g.daily_date || "";
    if (g.mode === "race") what = races[g.game_id] || "";
    const label = tNodes("home.continue.item", {
      mode: t(`mode.${g.mode}`),
      what,
      score: g.score,
      cards: tn("count.cardsLeft", g.cards_left),
    });
    list.append(
      h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            onclick: () =>
              g.mode === "race" && races[g.game_id] ? on.joinRace(races[g.game_id]) : on.startGame({ type: "resume", game_id: g.game_id }),
          },
          label,
        ),
      ),
    );
  }
  $("#tile-continue").hidden = games.length === 0;
  if (store.player) $("#menu-profile").href = `/players/${store.player.id}`;
  const info = $("#daily-info");
  try {
    const daily = await api.daily();
    store.today = daily.date;
    let text = t("home.daily.info", {
      date: daily.date,
      rules: t(`rules.short.${daily.rules}`),
      players: tn("count.players", daily.players),
    });
    if (typeof daily.par === "number") {
      store.dailyPar[daily.date] = daily.par;
      text += ` · ${t("home.daily.par", { par: daily.par })}`;
    }
    info.textContent = text;
    const level = levelBadge(daily, "daily-level");
    if (level) info.append(" · ", level);
    const mine = games.find((g) => g.mode === "daily" && g.daily_date === daily.date);
    const over = !mine && (await dailyOver(daily.date));
    $("#btn-daily").textContent = t(mine ? "home.daily.resume" : over ? "home.daily.result" : "home.daily.play");
  } catch (err) {
    info.textContent = errorText(err.code);
  }
}

/**
 * Whether my daily of `date` is over (won, blocked or resigned), read from my profile's days;
 * false when signed out or when the profile cannot be read.
 */
async function dailyOver(date) {
  if (!store.player) return false;
  try {
    const profile = await api.player(store.player.id);
    return profile.days.some((d) => d.date === date && d.status !== "playing");
  } catch (err) {
    return false;
  }
}

/** The race's time limits, in the current language (the choice made is kept). */
export function timeLimitOptions() {
  const select = $("#race-limit");
  const current = select.value || "300";
  select.textContent = "";
  for (const minutes of [2, 5, 10, 15, 30]) {
    select.append(h("option", { value: String(minutes * 60) }, t("home.race.minutes", { n: minutes })));
  }
  select.value = current;
}
