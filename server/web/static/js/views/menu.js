// The menu (the home view): games to continue, today's daily as it stands for the player (not
// played, being played, the result and rank), the streak and a strip of the last four weeks,
// the players followed (online first) and their results today, free play by code or at random,
// a quick race to ask for, a race to see by its invite or to create, the leaderboard, and the
// player's own profile. It draws what the store and the server's daily say and hands the
// player's choice to the handlers of initMenu.
import { api } from "../api.js";
import { codeText } from "../code.js";
import { $, clear, h } from "../dom.js";
import { t, tn, tNodes } from "../i18n.js";
import { raceGames, store } from "../store.js";
import { levelBadge } from "./difficulty.js";
import { codeError, errorText, homeError } from "./notices.js";
import { dayText } from "./profile.js";

/** How many weeks of days the menu's strip of past dailies shows (today the last). */
export const STRIP_WEEKS = 4;
const STRIP_DAYS = STRIP_WEEKS * 7;

let on = null;

/**
 * @param {object} handlers  {startGame(message, options), joinRace(invite), openInvite(invite),
 *   createRace({code, rules, timeLimit}), openLeaderboard(), openProfile(playerId),
 *   openFollowing(), askQuickRace(rules), openLadder(rules)}
 */
export function initMenu(handlers) {
  on = handlers;
  timeLimitOptions();
  $("#btn-leaderboard").addEventListener("click", () => on.openLeaderboard());
  $("#menu-profile").addEventListener("click", (ev) => {
    ev.preventDefault();
    if (store.player) on.openProfile(store.player.id);
  });
  $("#home-following").addEventListener("click", (ev) => {
    ev.preventDefault();
    on.openFollowing();
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
  // The ladder's link is the rule set's chosen for a quick race.
  $("#quick-rules").addEventListener("change", () => ($("#home-ladder").href = `/ladder/${$("#quick-rules").value}`));
  $("#home-ladder").addEventListener("click", (ev) => {
    ev.preventDefault();
    on.openLadder($("#quick-rules").value);
  });
  $("#quick-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    on.askQuickRace($("#quick-rules").value);
  });
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
    const par = typeof daily.par === "number";
    if (par) {
      store.dailyPar[daily.date] = daily.par;
      text += ` · ${t("home.daily.par", { par: daily.par })}`;
    }
    info.textContent = text;
    $("#daily-par-explain").hidden = !par; // par said in one line where it first shows
    const level = levelBadge(daily, "daily-level");
    if (level) info.append(" · ", level);
    const mine = games.find((g) => g.mode === "daily" && g.daily_date === daily.date);
    const profile = await readProfile();
    const today = profile && profile.days.find((d) => d.date === daily.date);
    const over = !mine && !!today && today.status !== "playing";
    $("#btn-daily").textContent = t(mine ? "home.daily.resume" : over ? "home.daily.result" : "home.daily.play");
    drawToday(daily, mine, profile);
    renderHomeFriends();
  } catch (err) {
    info.textContent = errorText(err.code);
  }
}

/** My profile (for today's result, the streak and the strip); null when it cannot be read. */
async function readProfile() {
  if (!store.player) return null;
  try {
    return await api.player(store.player.id);
  } catch (err) {
    return null;
  }
}

/** Today's daily as it stands for me, my streak, and the strip of my last weeks of dailies. */
function drawToday(daily, mine, profile) {
  const state = $("#daily-state");
  const streak = $("#daily-streak");
  const strip = clear($("#daily-strip"));
  if (!profile) {
    state.textContent = store.player ? t("home.daily.stateFailed") : "";
    streak.textContent = "";
    return;
  }
  const today = profile.days.find((d) => d.date === daily.date);
  if (mine) state.textContent = t("home.daily.playing", { score: mine.score, cards: tn("count.cardsLeft", mine.cards_left) });
  else if (!today || today.status === "playing") state.textContent = t("home.daily.notPlayed");
  else {
    const status = t(`profile.status.${today.status}`);
    state.textContent =
      today.rank !== null
        ? t("home.daily.done", { status, rank: today.rank, ranked: daily.ranked, score: today.score })
        : t("home.daily.doneUnranked", { status, score: today.score });
  }
  streak.textContent = profile.streak.current ? tn("home.streak", profile.streak.current) : t("home.streakNone");
  const byDate = new Map(profile.days.map((d) => [d.date, d]));
  for (let back = STRIP_DAYS - 1; back >= 0; back--) {
    const d = new Date(`${profile.today}T00:00:00Z`);
    d.setUTCDate(d.getUTCDate() - back);
    const iso = d.toISOString().slice(0, 10);
    const day = byDate.get(iso);
    const words = `${iso}: ${day ? dayText(day) : t("profile.status.none")}`;
    strip.append(
      h("li", { class: `day ${day ? day.status : "none"}`, dataset: { date: iso }, title: words }, h("span", { class: "sr-only" }, words)),
    );
  }
}

/**
 * The menu's friends: the players I follow (online first) and their results today, read from
 * today's friends' board; the tile shows for a player signed in.
 */
export async function renderHomeFriends() {
  const tile = $("#tile-friends");
  tile.hidden = !store.token;
  if (!store.token || store.following === null) return;
  const list = $("#home-friends");
  let results = new Map();
  if (store.today && store.following.size) {
    try {
      const board = await api.friendsBoard(store.today, store.token);
      results = new Map(board.entries.map((e) => [e.player_id, e]));
    } catch (err) {
      results = null;
    }
  }
  clear(list);
  if (!store.following.size) {
    list.append(h("li", { class: "muted" }, t("home.friends.none")));
    return;
  }
  const players = [...store.following.values()].sort((a, b) => Number(b.online) - Number(a.online));
  for (const p of players) {
    const entry = results && results.get(p.id);
    const result = entry ? t("friends.resultToday", { rank: entry.rank, score: entry.score }) : results ? t("friends.noResultToday") : "—";
    list.append(
      h(
        "li",
        { dataset: { player: String(p.id) }, class: p.online ? "online" : "offline" },
        h("span", { class: "presence-dot", "aria-hidden": "true" }),
        h("span", { class: "sr-only" }, `${t(p.online ? "friends.online" : "friends.offline")}: `),
        t("home.friends.today", { name: p.name, result }),
      ),
    );
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
