// What an ended daily adds to the end panel: my rank among those who have finished so far
// (read again every POLL_MS while the panel shows), my streak (kept, begun or lost), a
// countdown to the next daily with the hour it opens in the player's own time zone, and Share:
// a short text that gives nothing away (date, rule set, score against par, time, streak, and a
// line of marks for how far each of the three peaks fell) — never a card or the deal's code.
// Copied to the clipboard, or handed to the phone's share sheet. The server's clock decides
// when the next daily opens: the countdown runs on the offset measured with the daily's
// `server_time` (docs/protocol.md §12.4).
import { api } from "../api.js";
import { copyText } from "../code.js";
import { $ } from "../dom.js";
import { formatTime, locale, t, tn } from "../i18n.js";
import { peaks } from "../rules.js";
import { store } from "../store.js";

/** How often the rank is read again while the panel shows (ms). */
export const POLL_MS = 15_000;

let shown = null; // {gameId, date, rank, ranked, streak, offset, closesAt, error}
let poller = null;
let ticker = null;
let shareTimer = null;

/** The marks for the three peaks, left to right: 🟩 cleared, 🟨 partly fallen, ⬜ untouched. */
export function peakMarks(tableau) {
  return peaks().map((positions) => {
    const gone = positions.filter((p) => tableau[p] === null).length;
    return gone === positions.length ? "🟩" : gone > 0 ? "🟨" : "⬜";
  }).join("");
}

/**
 * The streak as the profile tells it after today's result: {current, kept, lost}. `kept`: the
 * run goes on from yesterday; `lost`: the length of a run that ended before today's began (0
 * when none did). A game given up extends nothing (docs/rules.md §4 "Streaks").
 */
export function streakOf(profile, date) {
  const ranked = new Set(profile.days.filter((d) => d.rank !== null).map((d) => d.date));
  const dayBefore = (iso) => {
    const d = new Date(`${iso}T00:00:00Z`);
    d.setUTCDate(d.getUTCDate() - 1);
    return d.toISOString().slice(0, 10);
  };
  const current = profile.streak.current;
  const today = ranked.has(date);
  if (!today) return { current, kept: false, lost: 0, counted: false };
  if (current > 1) return { current, kept: true, lost: 0, counted: true };
  // A run of one: did one end before it? Its length is counted back from its last day.
  const earlier = [...ranked].filter((d) => d < dayBefore(date)).sort();
  let lost = 0;
  if (earlier.length) {
    for (let d = earlier[earlier.length - 1]; ranked.has(d); d = dayBefore(d)) lost++;
  }
  return { current, kept: false, lost, counted: true };
}

/** The text to share for an ended daily (nothing in it helps anyone play today's deal). */
export function shareText(game, facts) {
  const lines = [t("share.title", { date: game.daily_date, rules: t(`rules.short.${game.rules}`) })];
  lines.push(peakMarks(game.tableau));
  const score =
    typeof facts.par === "number"
      ? t("share.scorePar", { score: game.score, par: facts.par })
      : t("share.score", { score: game.score });
  lines.push(`${score} · ${formatTime(game.elapsed_ms)}`);
  if (facts.rank) lines.push(t("share.rank", { rank: facts.rank, ranked: facts.ranked }));
  if (facts.streak && facts.streak.current > 0) lines.push(tn("share.streak", facts.streak.current));
  return lines.join("\n");
}

function stop() {
  clearInterval(poller);
  clearInterval(ticker);
  poller = null;
  ticker = null;
}

/** Whether the panel shows `gameId`'s end now. */
function showing(gameId) {
  const game = store.game;
  return !!(game && game.game_id === gameId && store.view === "play" && !$("#end-panel").hidden);
}

/**
 * Draw (or hide) the daily part of the end panel for `game`: called whenever the panel is
 * drawn. Reading starts once per game; the rank is read again while the panel shows.
 */
export function renderDailyEnd(game) {
  const box = $("#end-daily");
  if (!game || game.mode !== "daily" || game.status === "playing" || $("#end-panel").hidden) {
    box.hidden = true;
    stop();
    return;
  }
  box.hidden = false;
  if (!shown || shown.gameId !== game.game_id) {
    shown = { gameId: game.game_id, date: game.daily_date, rank: null, ranked: null, streak: null, closesAt: null, offset: 0, par: null, error: null };
    $("#end-share-status").textContent = "";
    load(game.game_id, true);
  }
  if (!poller) poller = setInterval(() => (showing(shown.gameId) ? load(shown.gameId, false) : stop()), POLL_MS);
  if (!ticker) ticker = setInterval(() => (showing(shown.gameId) ? drawCountdown() : stop()), 1000);
  draw();
}

/** Read the rank (and, the first time, the streak and the next daily's hour). */
async function load(gameId, first) {
  const facts = shown;
  const me = store.player;
  if (!me) return;
  const date = facts.date;
  const reads = [api.daily(date), api.around(date, me.id, 0)];
  if (first) reads.push(api.player(me.id), api.daily());
  const [day, around, profile, today] = await Promise.allSettled(reads);
  if (shown !== facts || shown.gameId !== gameId) return;
  facts.error = day.status === "rejected" ? day.reason.code || "network" : null;
  if (day.status === "fulfilled") {
    facts.ranked = day.value.ranked;
    facts.par = day.value.par;
  }
  if (around.status === "fulfilled") {
    const mine = around.value.entries.find((e) => e.player_id === me.id);
    facts.rank = mine ? mine.rank : null;
  } else if (around.reason && around.reason.code !== "not_ranked") facts.error = around.reason.code || "network";
  if (first) {
    if (profile.status === "fulfilled") facts.streak = streakOf(profile.value, date);
    else facts.error = profile.reason.code || "network";
    if (today.status === "fulfilled") {
      facts.offset = Date.parse(today.value.server_time) - Date.now();
      facts.closesAt = Date.parse(today.value.closes_at);
    }
  }
  if (showing(gameId)) draw();
}

function draw() {
  const facts = shown;
  const game = store.game;
  const rank = $("#end-rank");
  if (facts.rank !== null && facts.ranked) rank.textContent = t("end.rank", { rank: facts.rank, ranked: facts.ranked });
  else if (game.status === "resigned") rank.textContent = t("end.rankNone");
  else rank.textContent = facts.error ? "" : t("end.rankLoading");
  const streak = $("#end-streak");
  const s = facts.streak;
  streak.dataset.kept = s ? String(s.kept) : "";
  if (!s) streak.textContent = "";
  else if (!s.counted) streak.textContent = s.current ? tn("end.streakNotExtended", s.current) : t("end.streakNone");
  else if (s.kept) streak.textContent = tn("end.streakKept", s.current);
  else if (s.lost) streak.textContent = tn("end.streakLost", s.lost);
  else streak.textContent = t("end.streakBegun");
  const failed = $("#end-daily-error");
  failed.hidden = !facts.error;
  if (facts.error) $("#end-daily-error-text").textContent = t("end.dailyReadFailed");
  drawCountdown();
}

function drawCountdown() {
  const el = $("#end-countdown");
  const facts = shown;
  if (!facts || facts.closesAt === null) {
    el.textContent = "";
    return;
  }
  const left = facts.closesAt - (Date.now() + facts.offset);
  // The hour the next daily opens (midnight UTC) in the player's own time zone.
  const at = new Date(facts.closesAt);
  const hour = new Intl.DateTimeFormat(locale(), { weekday: "short", hour: "numeric", minute: "2-digit" }).format(at);
  el.textContent = left > 0 ? t("end.nextDaily", { left: formatTime(left), at: hour }) : t("end.nextDailyOpen");
}

/** Share the result: the phone's share sheet where there is one, else the clipboard. */
async function share() {
  const game = store.game;
  if (!game || game.mode !== "daily" || !shown) return;
  const text = shareText(game, shown);
  const status = $("#end-share-status");
  const say = (key) => {
    status.textContent = t(key);
    clearTimeout(shareTimer);
    shareTimer = setTimeout(() => (status.textContent = ""), 4000);
  };
  const phone = window.matchMedia("(pointer: coarse)").matches;
  if (phone && typeof navigator.share === "function") {
    try {
      await navigator.share({ text });
      say("end.shared");
      return;
    } catch (err) {
      if (err && err.name === "AbortError") return; // the player closed the share sheet
    }
  }
  const preview = $("#end-share-text");
  preview.textContent = text;
  const done = await copyText(text, preview);
  preview.hidden = done === "copied";
  say(done === "copied" ? "end.shareCopied" : "end.shareSelected");
}

export function initDailyEnd() {
  $("#end-share").addEventListener("click", share);
  $("#end-daily-retry").addEventListener("click", () => {
    if (shown) load(shown.gameId, true);
  });
}
