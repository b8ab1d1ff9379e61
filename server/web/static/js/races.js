// Races: creating one, taking a seat or watching, the room as it changes (ROOM objects,
// race_go with my game, race_progress of every racer), starting it as its host, and leaving.
// It owns the race followed (store.race: {invite, room, role, offset, progress}) and tells
// the views with notify("race"); the room beside the table is views/race-panel.js.
import { clearQueue, goHome, showPlay } from "./games.js";
import { t } from "./i18n.js";
import { measureOffset, serverNow } from "./race-clock.js";
import { goTo, show } from "./router.js";
import { request } from "./session.js";
import { dropGame, followRace, leaveRaceContext, notify, rememberRaceGame, setGame, store } from "./store.js";
import { focusTable, renderGame } from "./views/game.js";
import { announce, codeError, codeErrorText, errorText, homeError, setMessage } from "./views/notices.js";
import { raceError } from "./views/race-panel.js";
import { rankedNoteRead } from "./views/ranked-note.js";

/** Open a race (on a code's deal, or a random one under `rules`) and enter its room. */
export async function createRace({ code, rules, timeLimit }) {
  homeError("");
  codeError("race-code", "");
  await rankedNoteRead(); // a racer's game is ranked: the note on ranked play is read first
  const message = { type: "race_create", time_limit_s: timeLimit };
  if (code) message.code = code;
  else message.rules = rules;
  const reply = await request(message);
  if (reply.type === "race") applyRace(reply, { enter: true });
  else if (code && (reply.code === "bad_code" || reply.code === "invalid_message")) {
    codeError("race-code", codeErrorText(reply.code));
  } else homeError(errorText(reply));
}

/**
 * Take a seat in a race (or, with `watch`, follow it as a spectator) and enter its room. A
 * refusal is shown on the invite page when that is where the player is ("invite-refused", with
 * the error reply), on the menu otherwise.
 */
export async function joinRace(invite, { watch = false } = {}) {
  homeError("");
  const clean = String(invite).trim();
  if (!clean) return;
  if (!watch) await rankedNoteRead(); // a racer's game is ranked: the note is read first
  const message = { type: "race_join", invite: clean };
  if (watch) message.watch = true;
  const reply = await request(message);
  if (reply.type === "race") applyRace(reply, { enter: true });
  else if (store.view === "invite" && store.invite) notify("invite-refused", reply);
  else {
    if (store.view !== "home") show("home");
    homeError(errorText(reply));
  }
}

/** Follow the race again after a reconnection (the room may have moved on meanwhile). */
export function rejoinRace() {
  request({ type: "race_join", invite: store.race.invite }).then((reply) => {
    if (reply.type === "race") applyRace(reply);
  });
}

/** How long after the start a racer without its game waits for `race_go` before asking (ms). */
const GO_GRACE_MS = 1500;
/** How often a racer still without its game asks again (ms). */
const GO_ASK_EVERY_MS = 2000;
let goAskedAt = 0;

/**
 * A racer whose race has started and who holds no game of it asks for the room again, which
 * brings the game: its `race_go` was lost (the page followed the room just as the countdown
 * ended, or its socket was replaced meanwhile). Asked every half second; nothing to do while
 * the `race_go` is on time.
 */
function askForMissingGame() {
  const race = store.race;
  if (!race || race.role !== "racer" || store.game) return;
  const room = race.room;
  if (room.status !== "running" || !room.starts_at) return;
  if (serverNow(race) < Date.parse(room.starts_at) + GO_GRACE_MS) return;
  if (Date.now() - goAskedAt < GO_ASK_EVERY_MS) return;
  goAskedAt = Date.now();
  rejoinRace();
}
setInterval(askForMissingGame, 500);

/** A `race` reply: follow its room (and my game in it); `enter`: show the room now. */
function applyRace(reply, { enter = false } = {}) {
  const room = reply.race;
  if (!store.race || store.race.invite !== room.invite) {
    followRace({ invite: room.invite, room, role: reply.role, offset: 0, progress: {} });
  }
  const race = store.race;
  if (room.version >= race.room.version) race.room = room;
  race.role = reply.role;
  measureOffset(race, room);
  goTo(room.link);
  if (reply.game) {
    rememberRaceGame(reply.game.game_id, room.invite);
    setGame(reply.game);
  } else if (enter) {
    renderGame(null);
  }
  if (enter || store.view !== "play") {
    clearQueue();
    setMessage("");
    showPlay();
    if (store.game) focusTable();
  } else {
    notify("race");
  }
}

/** A message the server pushed about the race followed; false when it is not about a race. */
export function racePush(msg) {
  const race = store.race;
  if (msg.type === "race_room" || msg.type === "race_results") {
    // Rooms may rarely arrive out of order: keep the one with the highest version.
    if (race && msg.race.invite === race.invite && msg.race.version >= race.room.version) {
      race.room = msg.race;
      measureOffset(race, msg.race);
      notify("race");
      if (msg.type === "race_results") announce(t("race.results"));
    }
  } else if (msg.type === "race_go") {
    if (race && msg.invite === race.invite) {
      rememberRaceGame(msg.game.game_id, race.invite);
      const wasWaiting = !store.game;
      setGame(msg.game);
      notify("race");
      if (wasWaiting) focusTable();
      announce(t("race.go"));
    }
  } else if (msg.type === "race_progress") {
    if (race && msg.invite === race.invite) {
      race.progress[msg.player_id] = msg;
      notify("race");
    }
  } else {
    return false;
  }
  return true;
}

/** Start the race (its host, in the lobby). */
export async function startRace() {
  const race = store.race;
  if (!race) return;
  const reply = await request({ type: "race_start", invite: race.invite });
  if (reply.type === "race") applyRace(reply);
  else {
    raceError(errorText(reply.code));
    // The start may or may not have been stored: the room tells.
    if (reply.code === "outcome_unknown") rejoinRace();
  }
}

/** Leave the race (giving up my game in it, if running) for the menu. */
export async function leaveRace() {
  const race = store.race;
  if (!race) return;
  const reply = await request({ type: "race_leave", invite: race.invite });
  if (reply.type === "race_left" || reply.type === "error") {
    dropGame();
    leaveRaceContext();
    goHome();
  }
}
