// A game at the table: starting one (a deal by code or at random, the daily, a game resumed),
// the player's actions sent one at a time with the newest seq, a hint, giving up, and going
// back to the menu. The server decides every move; this module asks it and puts its answer
// in the store (the views follow). It owns the action queue (store.queue, store.acting).
import { cardName, has, t } from "./i18n.js";
import { correctAddress, gamePath, goTo, show } from "./router.js";
import { request } from "./session.js";
import { dropGame, leaveRaceContext, notify, setGame, setOpenGames, store } from "./store.js";
import { checkHinted, focusTable, showHint } from "./views/game.js";
import { rankedNoteRead } from "./views/ranked-note.js";
import { announce, codeError, codeErrorText, errorText, homeError, setMessage } from "./views/notices.js";

/**
 * Ask for a game (new_game, join_daily or resume) and sit down at it. `quiet`: a failure only
 * forgets the game to resume; `field`: a failure shows under that code field; `at`: the
 * game's address, asked for by going back or forward to it — the answer is dropped if the
 * player has gone to another address meanwhile.
 */
export async function startGame(message, { quiet = false, field = null, at = null } = {}) {
  homeError("");
  // The daily's clock starts with its game: the note on ranked play is read first.
  if (message.type === "join_daily") await rankedNoteRead();
  const reply = await request(message);
  if (at !== null && location.pathname !== at) return;
  if (reply.type === "game") {
    if (field) codeError(field, "");
    leaveRaceContext();
    enterGame(reply.game);
  } else if (quiet) {
    if (store.view === "home") correctAddress("/"); // the game in the address is not mine
  } else if (field) {
    codeError(field, codeErrorText(reply.code));
  } else {
    if (store.view !== "home") show("home");
    homeError(errorText(reply));
  }
}

function enterGame(game) {
  clearQueue();
  setMessage("");
  setGame(game);
  showPlay();
  if (game.mode !== "race") goTo(gamePath(game.game_id));
  focusTable();
  if (game.mode === "free") checkHinted(game);
  else rankedNoteRead(); // a ranked game begun on another device: the note, if not read here
}

/** Show the table view, with the race panel as the race followed (if any) stands. */
export function showPlay() {
  show("play");
  notify("race");
}

/** Forget the actions not sent yet. */
export function clearQueue() {
  store.queue = [];
}

/** Queue an action: they go to the server one at a time, each with the newest seq. */
export function act(kind, pos) {
  const game = store.game;
  if (!game || store.view !== "play") return;
  if (game.status === "won" || game.status === "resigned") return;
  // A ranked game takes no undo: the server would refuse it, so it is not sent.
  if (kind === "undo" && game.mode !== "free") {
    setMessage(t("rejected.ranked_no_undo"));
    return;
  }
  // A blocked game is over in ranked play; in free play only undo can bring it back.
  if (game.status === "blocked" && (game.mode !== "free" || kind !== "undo")) return;
  if (store.queue.length >= 3) return;
  store.queue.push({ kind, pos });
  pump();
}

async function pump() {
  if (store.acting) return;
  store.acting = true;
  try {
    while (store.queue.length && store.game) {
      const next = store.queue.shift();
      const game = store.game;
      const message = { type: "action", game_id: game.game_id, seq: game.seq, action: next.kind };
      if (next.kind === "remove") message.pos = next.pos;
      const reply = await request(message);
      if (!store.game || store.game.game_id !== game.game_id) break;
      if (reply.type === "accepted") {
        setMessage("");
        setGame(reply.game);
        // An ended game's panel has said how it ended (views/end.js): that is not talked over.
        if (reply.game.status === "playing") {
          announce(
            `${t("table.wasteLabel", { card: cardName(reply.game.waste) })}. ${t("stat.score")} ${reply.game.score}`,
          );
        }
      } else if (reply.type === "rejected") {
        clearQueue();
        setGame(reply.game);
        let text = reply.message || "";
        if (!text && has(`msg.${reply.code}`)) text = t(`msg.${reply.code}`);
        setMessage(text);
      } else {
        clearQueue();
        setMessage(errorText(reply.code));
        // The action may or may not have been stored: the stored game tells.
        if (reply.code === "outcome_unknown") refreshGame();
      }
    }
  } finally {
    store.acting = false;
  }
}

/** Give up the game on the table. */
export async function resign() {
  const game = store.game;
  if (!game) return;
  const reply = await request({ type: "resign", game_id: game.game_id });
  if (reply.type === "game") setGame(reply.game);
  else {
    setMessage(errorText(reply.code));
    // The resignation may or may not have been stored: the stored game tells.
    if (reply.code === "outcome_unknown") refreshGame();
  }
}

/** Ask the server for the best next move (free play) and point at it for a moment. */
export async function hint() {
  const game = store.game;
  if (!game || store.view !== "play" || game.mode !== "free" || game.status !== "playing") return;
  const reply = await request({ type: "hint", game_id: game.game_id });
  if (!store.game || store.game.game_id !== game.game_id) return;
  if (reply.type !== "hint") {
    setMessage(errorText(reply.code));
    return;
  }
  store.hinted.add(game.game_id);
  store.checkedHinted.add(game.game_id);
  showHint(reply.action, reply.pos);
}

/**
 * Fetch the game on the table again (after a reconnection, an action of unknown outcome, or for
 * a notice in a new language), saying the seq last acknowledged: a stored game behind it is
 * answered `behind_acknowledged`, said on the table, and then shown as stored.
 */
export function refreshGame() {
  const id = store.game.game_id;
  request({ type: "resume", game_id: id, seq: store.game.seq }).then((reply) => {
    if (!store.game || store.game.game_id !== id) return;
    if (reply.type === "game") setGame(reply.game);
    else if (reply.code === "behind_acknowledged") {
      request({ type: "resume", game_id: id }).then((stored) => {
        if (stored.type !== "game" || !store.game || store.game.game_id !== id) return;
        setGame(stored.game);
        setMessage(errorText(reply.code));
      });
    }
  });
}

/** Leave the table (and any race) for the menu. */
export function goHome() {
  const game = store.game;
  if (game) {
    // Keep the menu's "continue" list current without another hello.
    const others = store.welcomeGames.filter((g) => g.game_id !== game.game_id);
    const open = game.status === "playing" || (game.status === "blocked" && game.mode === "free");
    setOpenGames(open ? [game, ...others] : others);
  }
  dropGame();
  clearQueue();
  leaveRaceContext();
  show("home");
}
