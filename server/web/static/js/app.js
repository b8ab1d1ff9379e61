// The TriPeaks browser client, wired together: which view follows which change of the store,
// what a welcome or a pushed message means, the top bar, a new language, and the start. The
// page talks to the server only through the documented websocket (/ws) and REST API
// (/api/v1). Where things are (docs/architecture.md): store.js holds the state, router.js
// the views and addresses, session.js the websocket, games.js, races.js and invite.js decide
// what the player's choices do, rules.js holds the rules, and views/ draws.
import { $ } from "./dom.js";
import { initialLocale, onLocaleChange, setLocale } from "./i18n.js";
import {
  acceptInvitation,
  dismissInvitation,
  follow,
  followName,
  freshenFollowing,
  invitationPush,
  inviteToRace,
  loadFollowing,
  unfollow,
} from "./friends.js";
import { act, goHome, hint, refreshGame, resign, startGame } from "./games.js";
import { initInvitePage, openInvite, renderInvitePage } from "./invite.js";
import { askQuickRace, cancelQuickRace, quickPush, reaskQuickRace } from "./quick.js";
import { createRace, joinRace, leaveRace, racePush, rejoinRace, startRace } from "./races.js";
import {
  boardInAddress,
  boardPath,
  correctAddress,
  dailyInAddress,
  dailyPath,
  followingInAddress,
  gameInAddress,
  gamePath,
  goTo,
  inviteInAddress,
  ladderInAddress,
  ladderPath,
  onEnter,
  onHistory,
  onLeave,
  profileInAddress,
  replayInAddress,
  replayPath,
  settingsAddress,
  settingsInAddress,
  show,
} from "./router.js";
import * as session from "./session.js";
import {
  notify,
  savedLocale,
  setOpenGames,
  setPendingInvite,
  setPlayer,
  signOut,
  store,
  subscribe,
} from "./store.js";
import { refreshEnd } from "./views/end.js";
import { initGameView, onGame, renderGame } from "./views/game.js";
import { LadderView } from "./views/ladder.js";
import { Leaderboard } from "./views/leaderboard.js";
import { FollowingView } from "./views/following.js";
import { initMenu, openRaceForm, renderHome, renderHomeFriends, timeLimitOptions } from "./views/menu.js";
import { errorText, renderInvitations, setMessage } from "./views/notices.js";
import { ProfileView } from "./views/profile.js";
import { initRacePanel, renderRace } from "./views/race-panel.js";
import { initQueueView, renderQueue } from "./views/queue.js";
import { initRankedNote } from "./views/ranked-note.js";
import { hideRecovery, initRecovery, renderRecovery } from "./views/recovery.js";
import { ReplayView } from "./views/replay.js";
import { initRegister, openSignIn, renderInviteNote, renderWho, showSignedOutNote } from "./views/register.js";
import { initSettings, renderAccount, settingsFromAddress, showLanguage } from "./views/settings.js";

let leaderboard = null;
let replayView = null;

/** Show a game's replay at its address ("/replay/<game id>"). */
function openReplay(gameId) {
  goTo(replayPath(gameId));
  showReplay(gameId);
}

function showReplay(gameId) {
  show("replay");
  replayView.open(gameId);
}

let profile = null;
let followingView = null;
let ladder = null;

/** Show a rule set's ladder ("E" or "C"), at "/ladder/<rules>". */
function openLadder(rules) {
  goTo(ladderPath(rules));
  showLadder(rules);
}

function showLadder(rules) {
  show("ladder");
  ladder.open(rules);
}

/** Show the players I follow, at "/following". */
function openFollowing() {
  goTo("/following");
  showFollowing();
}

function showFollowing() {
  show("following");
  loadFollowing();
  followingView.open();
}

function openLeaderboard(date) {
  show("leaderboard");
  leaderboard.openDay(date || null);
  loadFollowing();
}

/** Show a week's or a month's board ("week" or "month", "2026-W49" or "2026-12"), from its address. */
function openBoard(kind, period) {
  show("leaderboard");
  leaderboard.openPeriod(kind, period);
  loadFollowing();
}

const invitationChoices = { join: acceptInvitation, dismiss: dismissInvitation };

/** Show a player's profile, at "/players/<id>". */
function openProfile(playerId) {
  goTo(`/players/${encodeURIComponent(playerId)}`);
  show("profile");
  profile.open(playerId);
  loadFollowing();
}

// ------------------------------------------------------------------------------ the store

subscribe("player", renderWho);
subscribe("player", renderAccount);
subscribe("pendingInvite", renderInviteNote);
subscribe("game", onGame);
// My own row in the race panel follows my STATE at once (not the next push).
subscribe("game", () => {
  if (store.race && store.game && store.game.mode === "race") notify("race");
});
subscribe("race", renderRace);
subscribe("race", refreshEnd); // a race game's end note says whether the race still runs
// In a lobby, who of the players I follow is online is read again (at most every few seconds).
subscribe("race", () => {
  const race = store.race;
  if (race && race.role === "racer" && race.room.status === "lobby") freshenFollowing(race.invite);
});
subscribe("following", () => {
  if (store.view === "leaderboard") leaderboard.render();
  if (store.view === "home") renderHomeFriends();
  if (store.view === "following") followingView.render();
  if (store.view === "profile") profile.render();
  if (store.race) renderRace();
});
subscribe("invitations", () => renderInvitations(invitationChoices));
subscribe("errorHelp", session.rehello);
subscribe("showPlayable", () => {
  if (store.game) renderGame(store.game);
});
subscribe("quick", () => {
  if (store.view === "queue") renderQueue();
});
onEnter("queue", renderQueue);
// Leaving the waiting view (for the menu, Back, a link…) ends the wait.
onLeave("queue", () => cancelQuickRace({ home: false }));
onEnter("home", () => {
  renderHome();
  loadFollowing();
});

// ------------------------------------------------------------------------------ the session

function welcome(message, { again, first }) {
  setPlayer(message.player);
  // The game on the table, when the server found it unchanged, was not sent again.
  const unchanged = message.unchanged ?? [];
  const kept = store.game && unchanged.includes(store.game.game_id);
  const games = kept ? [...message.games, store.game] : message.games;
  if (kept) games.sort((a, b) => b.game_id - a.game_id); // newest first, as the server lists
  setOpenGames(games);
  if (store.view === "home") renderHome();
  if (again) {
    // A language or error-help change: fetch the game again for its localised notice.
    if (store.game) refreshGame();
    return;
  }
  if (first) {
    // Opened from a race's link: its invite page is shown, not the last game; nor over a
    // profile, a replay or a board opened from its address.
    const shown = ["invite", "profile", "replay", "leaderboard", "ladder"].includes(store.view);
    if (store.pendingInvite || shown || store.race) return;
    // A reload at the table: the game in the address is resumed.
    const gameId = gameInAddress();
    if (gameId) startGame({ type: "resume", game_id: gameId }, { quiet: true, at: gamePath(gameId) });
    return;
  }
  // A reconnect: wait for a quick race again, follow the race again, or resume the game.
  reaskQuickRace();
  if (store.race) rejoinRace();
  else if (store.game && !kept) refreshGame();
}

function push(msg) {
  if (racePush(msg)) return;
  if (quickPush(msg)) return;
  if (invitationPush(msg)) return;
  if (msg.type === "error") setMessage(errorText(msg.code));
}

/** This device's token no longer works (signed out from another device, or never known). */
function signedOut() {
  signOut();
  session.disconnect();
  hideRecovery();
  showSignedOutNote(true);
  show("register");
}

/** Registered or signed in: open the session, then the race the page was opened for, or the menu. */
function signedIn() {
  renderAccount();
  session.connect();
  if (store.pendingInvite) openInvite(store.pendingInvite);
  else show("home");
}

/** From the settings: sign this device in with a recovery code (as this player or another). */
function signInAgain() {
  show("register");
  openSignIn();
}

session.configure({ welcome, push, unauthorized: signedOut });

// ------------------------------------------------------------------------------ language

onLocaleChange(() => {
  showLanguage();
  renderWho();
  renderInviteNote();
  timeLimitOptions();
  if (store.view === "invite") renderInvitePage();
  session.rehello();
  renderRecovery();
  if (store.view === "home") renderHome();
  if (store.game) renderGame(store.game);
  else if (store.race) renderGame(null);
  if (store.race) notify("race");
  if (store.view === "leaderboard") leaderboard.render();
  if (store.view === "replay") replayView.render();
  renderInvitations(invitationChoices);
  if (store.view === "profile") profile.render();
  if (store.view === "following") followingView.render();
  if (store.view === "queue") renderQueue();
  if (store.view === "ladder") ladder.render();
  session.relabel();
});

// ------------------------------------------------------------------------------ start

function boot() {
  setLocale(initialLocale(savedLocale()));
  initGameView({ act, hint, resign, startGame, goHome, openLeaderboard });
  initRacePanel({
    start: startRace,
    leave: leaveRace,
    home: goHome,
    replay: (code) => startGame({ type: "new_game", code }),
    watchReplay: openReplay,
    newRace: () => {
      goHome();
      openRaceForm();
    },
    invite: inviteToRace,
  });
  leaderboard = new Leaderboard($("#view-leaderboard"), {
    me: () => store.player,
    token: () => store.token,
    following: () => store.following,
    follow,
    unfollow,
    followName,
    replay: (code) => startGame({ type: "new_game", code }),
    watchReplay: openReplay,
    errorText,
    openProfile,
    dated: (date) => goTo(dailyPath(date)),
    periodShown: (kind, period, { replace = false } = {}) => (replace ? correctAddress : goTo)(boardPath(kind, period)),
  });
  replayView = new ReplayView($("#view-replay"), { errorText });
  profile = new ProfileView($("#view-profile"), {
    me: () => store.player,
    token: () => store.token,
    following: () => store.following,
    follow,
    unfollow,
    errorText,
    openLadder,
    openRace: openInvite,
  });
  ladder = new LadderView($("#view-ladder"), {
    me: () => store.player,
    token: () => store.token,
    errorText,
    openProfile,
    addressed: (rules) => goTo(ladderPath(rules)),
  });
  followingView = new FollowingView($("#view-following"), {
    token: () => store.token,
    today: () => store.today,
    following: () => store.following,
    unfollow,
    openProfile,
    errorText,
  });
  initMenu({
    startGame,
    joinRace,
    openInvite,
    createRace,
    openLeaderboard: () => openLeaderboard(),
    openProfile,
    openFollowing,
    askQuickRace,
    openLadder,
  });
  initQueueView({ cancel: () => cancelQuickRace() });
  initSettings({ openSignIn: signInAgain, unauthorized: signedOut, address: settingsAddress });
  initRecovery();
  initRankedNote();
  initRegister(signedIn);
  initInvitePage();
  renderWho();

  $("#nav-home").addEventListener("click", () => (store.token ? goHome() : show("register")));
  $("#nav-leaderboard").addEventListener("click", () => openLeaderboard());
  onHistory((changed) => {
    settingsFromAddress(settingsInAddress());
    if (changed) route();
  });
  if (store.token) session.connect();
  route({ first: true });
}

/**
 * Show the view the address names (router.js): at the start (`first`), and when the player
 * goes back or forward to another view. A profile, a replay, a day's, a week's or a month's
 * board and a ladder are public: shown signed in or not.
 */
function route({ first = false } = {}) {
  if (store.view === "replay" && !replayInAddress()) replayView.pause();
  if (settingsInAddress()) {
    settingsFromAddress(true);
    if (first) show(store.token ? "home" : "register");
    return;
  }
  const player = profileInAddress();
  const replayed = replayInAddress();
  const date = dailyInAddress();
  const rated = ladderInAddress();
  if (rated) {
    showLadder(rated);
    return;
  }
  const board = boardInAddress();
  if (player) {
    show("profile");
    profile.open(player);
    loadFollowing();
    return;
  }
  if (replayed) {
    showReplay(replayed);
    return;
  }
  if (date) {
    openLeaderboard(date);
    return;
  }
  if (board) {
    openBoard(board.kind, board.period);
    return;
  }
  const invite = inviteInAddress();
  if (first) setPendingInvite(invite);
  if (!store.token) {
    show("register");
    $("#register-name").focus();
    return;
  }
  const gameId = gameInAddress();
  if (followingInAddress()) showFollowing();
  else if (invite) openInvite(invite);
  else if (first) show("home", { keepAddress: !!gameId }); // its game is resumed once welcomed
  else if (gameId) startGame({ type: "resume", game_id: gameId }, { at: gamePath(gameId) });
  else goHome();
}

// For tests and debugging: the connection (to drop it and watch it come back) and the state.
window.tripeaks = {
  get store() {
    return store;
  },
  get connection() {
    return session.connection();
  },
};

boot();
