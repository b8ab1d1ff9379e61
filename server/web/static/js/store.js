// The client's state, and the functions that change it: who plays (token, player), the
// settings, the view shown, the game on the table, the race followed and the invite page's
// room. What outlives a reload is kept here too: the player, token and settings in
// localStorage, and which race each race game was played in (the game on the table is in the
// address, router.js, and resumed from there after a reload).
//
// Anything may read `store`; changes go through the functions below, and a change others must
// follow is announced with notify(topic) to whoever subscribe()d to it (app.js wires the
// views): "player", "pendingInvite", "game" (with the STATE shown before), "race",
// "errorHelp", "showPlayable", "following", "invitations", and "invite-refused" (with the error
// reply). Four parts have one owner each, which fills them in and then notifies or draws: the
// race followed (races.js), the invite page's room (invite.js), the action queue (games.js),
// and the players I follow and the invitations I got (friends.js). The rest
// (hinted games, pars, today's date) are caches, written where they are learnt.

const KEY = {
  token: "tripeaks.token",
  player: "tripeaks.player",
  locale: "tripeaks.locale",
  errorHelp: "tripeaks.errorHelp",
  showPlayable: "tripeaks.showPlayable",
  raceGames: "tripeaks.raceGames",
  rankedNoteSeen: "tripeaks.rankedNoteSeen", // the note that ranked games have no undo was read
};

function load(key, fallback) {
  try {
    const raw = localStorage.getItem(key);
    return raw === null ? fallback : JSON.parse(raw);
  } catch (err) {
    return fallback;
  }
}

function save(key, value) {
  try {
    if (value === null || value === undefined) localStorage.removeItem(key);
    else localStorage.setItem(key, JSON.stringify(value));
  } catch (err) {
    /* private mode: keep going without storage */
  }
}

export const store = {
  token: load(KEY.token, null),
  player: load(KEY.player, null),
  errorHelp: load(KEY.errorHelp, true) !== false,
  showPlayable: load(KEY.showPlayable, false) === true,
  rankedNoteSeen: load(KEY.rankedNoteSeen, false) === true,
  view: null,
  welcomeGames: [], // the open games the last welcome listed (kept current by goHome)
  game: null,
  gameAt: 0, // performance.now() when the STATE arrived (the clock runs on from there)
  race: null, // {invite, room, role, offset, progress: {player_id: race_progress}}
  pendingInvite: null, // the race in the address the page was opened with
  quick: null, // the quick race waited for (quick.js): {rules, rating, gap, startedAt, asking}
  invite: null, // the race seen before joining: {invite, room, error, joinError (a reply), busy}
  queue: [], // actions waiting to be sent (games.js)
  acting: false, // an action is with the server (games.js)
  hinted: new Set(), // game ids marked as hinted (asked here, or found in the game's summary)
  checkedHinted: new Set(), // free games whose summary was asked for the hinted mark
  par: {}, // game_id → {par} once the game has ended (null: no par known)
  dailyPar: {}, // date → par of that day's daily (from /api/v1/daily)
  today: null, // the daily's date, from the server
  following: null, // the players I follow, id → {id, name, since, online} (friends.js); null: not read yet
  invitations: [], // races I was invited to, newest last: {invite, from: {id, name}} (friends.js)
};

// ------------------------------------------------------------------------------ notices

const subscribers = new Map();

/** Call `fn(...details)` whenever `topic` is notified. */
export function subscribe(topic, fn) {
  if (!subscribers.has(topic)) subscribers.set(topic, []);
  subscribers.get(topic).push(fn);
}

/** Tell the subscribers of `topic` (in the order they subscribed) that it changed. */
export function notify(topic, ...details) {
  for (const fn of subscribers.get(topic) || []) fn(...details);
}

// ------------------------------------------------------------------------------ the player

/**
 * Registered: the token and player are kept. Nothing is notified yet: the top bar names the
 * player once the server has welcomed them on the websocket (setPlayer).
 */
export function signIn(token, player) {
  store.token = token;
  store.player = player;
  save(KEY.token, token);
  save(KEY.player, player);
}

/** The player as the server names them now (each welcome). */
export function setPlayer(player) {
  store.player = player;
  save(KEY.player, player);
  notify("player");
}

export function signOut() {
  store.token = null;
  store.player = null;
  store.following = null;
  store.invitations = [];
  save(KEY.token, null);
  save(KEY.player, null);
  notify("player");
}

/** A setting: "errorHelp" or "showPlayable" (kept, and notified under its name). */
export function setSetting(name, value) {
  store[name] = value;
  save(KEY[name], value);
  notify(name);
}

/** The note that ranked games have no undo has been read: it is not shown again. */
export function setRankedNoteSeen() {
  store.rankedNoteSeen = true;
  save(KEY.rankedNoteSeen, true);
}

export function savedLocale() {
  return load(KEY.locale, null);
}

export function saveLocale(value) {
  save(KEY.locale, value);
}

// ------------------------------------------------------------------------------ the page

/** The view shown (router.js); leaving the invite page forgets its room. */
export function setView(view) {
  store.view = view;
  if (view !== "invite") store.invite = null;
}

export function setOpenGames(games) {
  store.welcomeGames = games;
}

/** The race the page was opened for, to show once signed in: notified as "pendingInvite". */
export function setPendingInvite(invite) {
  store.pendingInvite = invite;
  notify("pendingInvite");
}

/** The invite page's room (invite.js fills it in and draws it). */
export function setInvite(state) {
  store.invite = state;
}

// ------------------------------------------------------------------------------ the table

/** A new STATE on the table (or none): notified as "game" with the STATE before. */
export function setGame(game) {
  const before = store.game;
  store.game = game;
  store.gameAt = performance.now();
  notify("game", before);
}

/** Take the game off the table without drawing it: the view that follows shows no table. */
export function dropGame() {
  store.game = null;
}

// ------------------------------------------------------------------------------ races

/** Follow a race (races.js fills it in and notifies "race"); the table is cleared for it. */
export function followRace(race) {
  store.race = race;
  store.game = null;
}

/** Follow no race any more: notified as "race". */
export function leaveRaceContext() {
  store.race = null;
  notify("race");
}

/** Which race invite each race game (by id) was played in, for the menu's "continue" list. */
export function raceGames() {
  return load(KEY.raceGames, {});
}

export function rememberRaceGame(gameId, invite) {
  const races = load(KEY.raceGames, {});
  races[gameId] = invite;
  const ids = Object.keys(races);
  if (ids.length > 50) delete races[ids[0]];
  save(KEY.raceGames, races);
}
