// The TriPeaks browser client: registration, the menu, the table, races and the leaderboard.
// It talks to the server only through the documented websocket (/ws) and REST API (/api/v1).
import { api } from "./api.js";
import { Connection } from "./connection.js";
import { $, h } from "./dom.js";
import { codeText, copyControl } from "./code.js";
import { cardName, formatTime, has, initialLocale, locale, onLocaleChange, setLocale, t, tn, tNodes } from "./i18n.js";
import { Leaderboard } from "./leaderboard.js";
import { measureOffset, RacePanel, renderInvite, serverNow } from "./race.js";
import { Table } from "./table.js";

const KEY = {
  token: "tripeaks.token",
  player: "tripeaks.player",
  locale: "tripeaks.locale",
  errorHelp: "tripeaks.errorHelp",
  showPlayable: "tripeaks.showPlayable",
  raceGames: "tripeaks.raceGames",
  current: "tripeaks.current", // sessionStorage: the game on the table, resumed after a reload
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

const store = {
  token: load(KEY.token, null),
  player: load(KEY.player, null),
  errorHelp: load(KEY.errorHelp, true) !== false,
  showPlayable: load(KEY.showPlayable, false) === true,
  view: null,
  welcomed: false,
  welcomeGames: [],
  game: null,
  gameAt: 0,
  race: null, // {invite, room, role, offset, progress: {player_id: race_progress}}
  pendingInvite: null,
  invite: null, // the race seen before joining: {invite, room, error, busy}
  queue: [],
  acting: false,
  hinted: new Set(), // game ids marked as hinted (asked here, or found in the game's summary)
  checkedHinted: new Set(), // free games whose summary was asked for the hinted mark
  par: {}, // game_id → {par} once the game has ended (null: no par known)
  dailyPar: {}, // date → par of that day's daily (from /api/v1/daily)
};

let conn = null;
let table = null;
let racePanel = null;
let leaderboard = null;
let messageTimer = null;

// ------------------------------------------------------------------------------------ views

const VIEWS = ["register", "home", "play", "invite", "leaderboard"];

function show(view) {
  store.view = view;
  for (const name of VIEWS) $(`#view-${name}`).hidden = name !== view;
  $("#nav-leaderboard").hidden = !store.token;
  if (view === "home") renderHome();
  if (view !== "invite") store.invite = null;
  // The race's address stays while its room, its invite page or the sign-up before it is shown.
  const keepPath = view === "play" || view === "invite" || (view === "register" && store.pendingInvite);
  if (!keepPath && location.pathname !== "/") history.pushState(null, "", "/");
  window.scrollTo(0, 0);
}

function errorText(code) {
  return has(`err.${code}`) ? t(`err.${code}`) : t("err.generic", { code });
}

function setMessage(text) {
  const el = $("#message");
  el.textContent = text || "";
  clearTimeout(messageTimer);
  if (text) messageTimer = setTimeout(() => (el.textContent = ""), 6000);
}

function announce(text) {
  $("#announce").textContent = text;
}

// ----------------------------------------------------------------------------- registration

async function register(ev) {
  ev.preventDefault();
  const input = $("#register-name");
  const button = $("#register-submit");
  const error = $("#register-error");
  error.textContent = "";
  button.disabled = true;
  button.textContent = t("register.busy");
  try {
    const me = await api.register(input.value);
    store.token = me.token;
    store.player = { id: me.id, name: me.name };
    save(KEY.token, me.token);
    save(KEY.player, store.player);
    connect();
    if (store.pendingInvite) openInvite(store.pendingInvite);
    else show("home");
  } catch (err) {
    error.textContent = errorText(err.code);
    input.focus();
  } finally {
    button.disabled = false;
    button.textContent = t("register.submit");
    renderInviteNote();
  }
}

function signedOut() {
  store.token = null;
  store.player = null;
  save(KEY.token, null);
  save(KEY.player, null);
  conn = null;
  $("#conn-banner").hidden = true;
  renderWho();
  show("register");
}

function renderWho() {
  $("#who").textContent = store.player ? t("player.signedIn", { name: store.player.name }) : "";
}

// ------------------------------------------------------------------------------ connection

function connect() {
  if (conn) conn.stop();
  store.welcomed = false;
  conn = new Connection({
    hello: () => ({ token: store.token, locale: locale(), error_help: store.errorHelp }),
    onWelcome,
    onPush,
    onStatus: (online) => {
      const banner = $("#conn-banner");
      banner.textContent = online ? "" : t("conn.offline");
      banner.hidden = online;
    },
    onUnauthorized: signedOut,
  });
  conn.start();
}

function onWelcome(welcome, { again }) {
  store.player = welcome.player;
  save(KEY.player, store.player);
  renderWho();
  store.welcomeGames = welcome.games;
  if (store.view === "home") renderHome();
  const first = !store.welcomed;
  store.welcomed = true;
  if (again) {
    // A language or error-help change: fetch the game again for its localised notice.
    if (store.game) refreshGame();
    return;
  }
  if (first) {
    // Opened from a race's link: its invite page is shown, not the last game.
    if (store.pendingInvite || store.view === "invite" || store.race) return;
    const current = sessionLoad();
    if (current && current.game_id) {
      startGame({ type: "resume", game_id: current.game_id }, { quiet: true });
    }
    return;
  }
  // A reconnect: follow the race again, or resume the game on the table.
  if (store.race) {
    conn.request({ type: "race_join", invite: store.race.invite }).then((reply) => {
      if (reply.type === "race") applyRace(reply);
    });
  } else if (store.game) {
    refreshGame();
  }
}

function refreshGame() {
  const id = store.game.game_id;
  conn.request({ type: "resume", game_id: id }).then((reply) => {
    if (reply.type === "game" && store.game && store.game.game_id === id) setGame(reply.game);
  });
}

function onPush(msg) {
  const race = store.race;
  if (msg.type === "race_room" || msg.type === "race_results") {
    // Rooms may rarely arrive out of order: keep the one with the highest version.
    if (race && msg.race.invite === race.invite && msg.race.version >= race.room.version) {
      race.room = msg.race;
      measureOffset(race, msg.race);
      renderRace();
      if (msg.type === "race_results") announce(t("race.results"));
    }
  } else if (msg.type === "race_go") {
    if (race && msg.invite === race.invite) {
      rememberRaceGame(msg.game.game_id, race.invite);
      const wasWaiting = !store.game;
      setGame(msg.game);
      renderRace();
      if (wasWaiting) table.focusFirst();
      announce(t("race.go"));
    }
  } else if (msg.type === "race_progress") {
    if (race && msg.invite === race.invite) {
      race.progress[msg.player_id] = msg;
      renderRace();
    }
  } else if (msg.type === "error") {
    setMessage(errorText(msg.code));
  }
}

// ------------------------------------------------------------------------------ menu

async function renderHome() {
  const games = store.welcomeGames || [];
  const list = $("#continue-list");
  list.textContent = "";
  const races = load(KEY.raceGames, {});
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
              g.mode === "race" && races[g.game_id] ? joinRace(races[g.game_id]) : startGame({ type: "resume", game_id: g.game_id }),
          },
          label,
        ),
      ),
    );
  }
  $("#tile-continue").hidden = games.length === 0;
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
    const mine = games.find((g) => g.mode === "daily" && g.daily_date === daily.date);
    $("#btn-daily").textContent = mine ? t("home.daily.resume") : t("home.daily.play");
  } catch (err) {
    info.textContent = errorText(err.code);
  }
}

function homeError(text) {
  const el = $("#home-error");
  el.textContent = text || "";
  if (text) el.scrollIntoView({ block: "nearest" });
}

function timeLimitOptions() {
  const select = $("#race-limit");
  const current = select.value || "300";
  select.textContent = "";
  for (const minutes of [2, 5, 10, 15, 30]) {
    select.append(h("option", { value: String(minutes * 60) }, t("home.race.minutes", { n: minutes })));
  }
  select.value = current;
}

// ------------------------------------------------------------------------------ games

async function startGame(message, { quiet = false, field = null } = {}) {
  homeError("");
  const reply = await conn.request(message);
  if (reply.type === "game") {
    if (field) codeError(field, "");
    leaveRaceContext();
    enterGame(reply.game);
  } else if (quiet) {
    sessionSave(null);
  } else if (field) {
    codeError(field, codeErrorText(reply.code));
  } else {
    if (store.view !== "home") show("home");
    homeError(errorText(reply.code));
  }
}

/** A typed code the server refused: its own message, and longer than the protocol's 64
 * characters reads as an invalid code too. */
function codeErrorText(code) {
  return errorText(code === "invalid_message" ? "bad_code" : code);
}

/** Show (or clear) an error under a code field: "free-code" or "race-code". */
function codeError(field, text) {
  const input = $(`#${field}`);
  const el = $(`#${field}-error`);
  el.textContent = text || "";
  if (text) {
    input.setAttribute("aria-invalid", "true");
    el.scrollIntoView({ block: "nearest" });
  } else {
    input.removeAttribute("aria-invalid");
  }
}

function enterGame(game) {
  store.queue = [];
  setMessage("");
  setGame(game);
  showPlay();
  table.focusFirst();
  if (game.mode === "free") checkHinted(game);
}

function showPlay() {
  show("play");
  renderRace();
}

function setGame(game) {
  const before = store.game;
  store.game = game;
  store.gameAt = performance.now();
  if (game && game.mode !== "race") sessionSave({ game_id: game.game_id });
  if (!game || !before || before.game_id !== game.game_id || before.seq !== game.seq) table.clearSuggestion();
  renderGame(before);
  // My own row in the race panel follows my STATE at once (not the next push).
  if (store.race && game && game.mode === "race") renderRace();
}

function renderGame(before) {
  const game = store.game;
  const board = $("#board");
  board.hidden = !game;
  $("#view-play").classList.toggle("has-game", !!game);
  $("#stats").hidden = !game;
  if (!game) {
    $("#play-title").textContent = store.race ? t("mode.raceInvite", { invite: store.race.invite }) : "";
    return;
  }
  let title;
  if (game.mode === "daily") title = tNodes("mode.dailyOf", { date: game.daily_date });
  else if (game.mode === "race") title = tNodes("mode.raceInvite", { invite: store.race ? store.race.invite : "" });
  else title = tNodes("mode.freeCode", { code: game.code ? codeText(game.code) : "" });
  title.push(` · ${t(`rules.short.${game.rules}`)}`);
  const head = $("#play-title");
  const text = title.map((x) => (typeof x === "string" ? x : x.textContent)).join("");
  if (head.textContent !== text) head.replaceChildren(...title);
  $("#stat-score").textContent = String(game.score);
  $("#stat-moves").textContent = String(game.moves);
  tick();
  // Never highlight playable cards in ranked (daily) or race games.
  const highlight = store.showPlayable && game.mode === "free";
  board.classList.toggle("highlighting", highlight);
  table.render(game, { highlight });
  const canResign = game.status === "playing" || (game.status === "blocked" && game.mode === "free");
  $("#btn-resign").hidden = !canResign;
  // Hints: free play only, while there is a move to make.
  $("#btn-hint").hidden = !(game.mode === "free" && game.status === "playing");
  $("#hint-note").hidden = !(game.mode === "free" && store.hinted.has(game.game_id));
  if (!canResign) $("#resign-confirm").hidden = true;
  renderEnd(game, before);
}

function renderEnd(game, before) {
  const panel = $("#end-panel");
  if (game.status === "playing") {
    panel.hidden = true;
    return;
  }
  const titles = {
    won: t("end.won.title"),
    blocked: game.message || t("end.blocked.title"),
    resigned: t("end.resigned.title"),
  };
  $("#end-title").textContent = titles[game.status] || "";
  $("#end-summary").textContent = t("end.summary", {
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
    if (game.status === "blocked" && game.can_undo) actions.append(button(t("end.undo"), () => act("undo"), "primary"));
    if (game.code) actions.append(button(t("end.replay"), () => startGame({ type: "new_game", code: game.code })));
    actions.append(button(t("end.newRandom"), () => startGame({ type: "new_game", rules: game.rules })));
    actions.append(button(t("end.menu"), goHome));
  } else if (game.mode === "daily") {
    actions.append(button(t("end.leaderboard"), () => openLeaderboard(game.daily_date), "primary"));
    actions.append(button(t("end.menu"), goHome));
  }
  const wasPlaying = !before || before.game_id !== game.game_id || before.status === "playing";
  panel.hidden = false;
  if (wasPlaying && before && before.game_id === game.game_id) {
    const first = actions.querySelector("button");
    if (first) first.focus();
    announce(`${$("#end-title").textContent}. ${$("#end-summary").textContent}`);
  }
}

/** "Par 752 · your score 650 (86%)" under the summary of an ended free or daily game. */
function renderPar(game) {
  const el = $("#end-par");
  const known = store.par[game.game_id];
  if (game.mode === "race" || game.status === "playing" || !known) {
    el.hidden = true;
    el.textContent = "";
    if (game.mode !== "race" && game.status !== "playing" && known === undefined) loadPar(game);
    return;
  }
  // The share is the server's par_share (score / par), worked out for the score shown.
  const share = game.score / known.par;
  el.textContent = Number.isFinite(share)
    ? t("end.par", { par: known.par, score: game.score, share: Math.round(share * 100) })
    : t("end.parOnly", { par: known.par });
  el.hidden = false;
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

/** A resumed free game may have had hints before: its summary says so (asked once per game). */
async function checkHinted(game) {
  if (store.checkedHinted.has(game.game_id) || game.moves === 0) return;
  store.checkedHinted.add(game.game_id);
  try {
    const summary = await api.game(game.game_id, store.token);
    if (summary.hinted) {
      store.hinted.add(game.game_id);
      if (store.game && store.game.game_id === game.game_id) renderGame(store.game);
    }
  } catch (err) {
    /* not known: no mark */
  }
}

/** Ask the server for the best next move (free play) and point at it for a moment. */
async function hint() {
  const game = store.game;
  if (!game || store.view !== "play" || game.mode !== "free" || game.status !== "playing") return;
  const reply = await conn.request({ type: "hint", game_id: game.game_id });
  if (!store.game || store.game.game_id !== game.game_id) return;
  if (reply.type !== "hint") {
    setMessage(errorText(reply.code));
    return;
  }
  store.hinted.add(game.game_id);
  store.checkedHinted.add(game.game_id);
  $("#hint-note").hidden = false;
  let text;
  if (reply.action === "remove" && reply.pos !== null && reply.pos !== undefined) {
    text = t("hint.remove", { card: cardName(store.game.tableau[reply.pos]) });
  } else if (reply.action === "draw") {
    text = t("hint.draw");
  } else {
    text = t("hint.none");
  }
  table.suggest(reply.action, reply.pos);
  setMessage(text);
  announce(text);
}

function tick() {
  const game = store.game;
  if (!game || store.view !== "play") return;
  let ms = game.elapsed_ms;
  if (game.status === "playing") {
    if (game.mode === "race" && store.race && store.race.room.starts_at) {
      const room = store.race.room;
      const now = room.ends_at ? Math.min(serverNow(store.race), Date.parse(room.ends_at)) : serverNow(store.race);
      ms = Math.max(0, now - Date.parse(room.starts_at));
    } else {
      ms = game.elapsed_ms + (performance.now() - store.gameAt);
    }
  }
  const text = formatTime(ms);
  const el = $("#stat-time");
  if (el.textContent !== text) el.textContent = text;
}

/** Queue an action: they go to the server one at a time, each with the newest seq. */
function act(kind, pos) {
  const game = store.game;
  if (!game || store.view !== "play") return;
  if (game.status === "won" || game.status === "resigned") return;
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
      const reply = await conn.request(message);
      if (!store.game || store.game.game_id !== game.game_id) break;
      if (reply.type === "accepted") {
        setMessage("");
        setGame(reply.game);
        announce(
          `${t("table.wasteLabel", { card: cardName(reply.game.waste) })}. ${t("stat.score")} ${reply.game.score}`,
        );
      } else if (reply.type === "rejected") {
        store.queue = [];
        setGame(reply.game);
        let text = reply.message || "";
        if (!text && has(`msg.${reply.code}`)) text = t(`msg.${reply.code}`);
        setMessage(text);
      } else {
        store.queue = [];
        setMessage(errorText(reply.code));
      }
    }
  } finally {
    store.acting = false;
  }
}

async function resign() {
  $("#resign-confirm").hidden = true;
  const game = store.game;
  if (!game) return;
  const reply = await conn.request({ type: "resign", game_id: game.game_id });
  if (reply.type === "game") setGame(reply.game);
  else setMessage(errorText(reply.code));
}

function goHome() {
  const game = store.game;
  if (game) {
    // Keep the menu's "continue" list current without another hello.
    const others = store.welcomeGames.filter((g) => g.game_id !== game.game_id);
    const open = game.status === "playing" || (game.status === "blocked" && game.mode === "free");
    store.welcomeGames = open ? [game, ...others] : others;
  }
  store.game = null;
  store.queue = [];
  sessionSave(null);
  leaveRaceContext();
  show("home");
}

function sessionSave(value) {
  try {
    if (value) sessionStorage.setItem(KEY.current, JSON.stringify(value));
    else sessionStorage.removeItem(KEY.current);
  } catch (err) {
    /* no storage */
  }
}

function sessionLoad() {
  try {
    return JSON.parse(sessionStorage.getItem(KEY.current) || "null");
  } catch (err) {
    return null;
  }
}

// ------------------------------------------------------------------------------ races

function rememberRaceGame(gameId, invite) {
  const races = load(KEY.raceGames, {});
  races[gameId] = invite;
  const ids = Object.keys(races);
  if (ids.length > 50) delete races[ids[0]];
  save(KEY.raceGames, races);
}

async function createRace(ev) {
  ev.preventDefault();
  homeError("");
  codeError("race-code", "");
  const code = $("#race-code").value.trim();
  const message = { type: "race_create", time_limit_s: Number($("#race-limit").value) };
  if (code) message.code = code;
  else message.rules = $("#race-rules").value;
  const reply = await conn.request(message);
  if (reply.type === "race") applyRace(reply, { enter: true });
  else if (code && (reply.code === "bad_code" || reply.code === "invalid_message")) {
    codeError("race-code", codeErrorText(reply.code));
  } else homeError(errorText(reply.code));
}

/** Take a seat in a race (or, with `watch`, follow it as a spectator) and enter its room. */
async function joinRace(invite, { watch = false } = {}) {
  homeError("");
  const clean = String(invite).trim();
  if (!clean) return;
  const message = { type: "race_join", invite: clean };
  if (watch) message.watch = true;
  const reply = await conn.request(message);
  if (reply.type === "race") applyRace(reply, { enter: true });
  else if (store.view === "invite" && store.invite) {
    store.invite.busy = null;
    store.invite.joinError = reply.code;
    renderInviteView();
  } else {
    if (store.view !== "home") show("home");
    homeError(errorText(reply.code));
  }
}

// ------------------------------------------------------------------------- invite page

/**
 * A race's invite page (its link, or an invite typed on the menu): the room as the REST API
 * shows it — host, players, rules, time limit, and whether the host chose the deal — before
 * the player decides to join or watch. A player already seated in the room goes straight in.
 */
async function openInvite(invite) {
  const clean = String(invite).trim();
  store.pendingInvite = null;
  renderInviteNote();
  if (!clean) return;
  const path = `/race/${encodeURIComponent(clean)}`;
  if (location.pathname !== path) history.pushState(null, "", path);
  store.game = null;
  leaveRaceContext();
  show("invite");
  store.invite = { invite: clean, room: null, error: null, joinError: null, busy: null };
  renderInviteView();
  await refreshInvite({ first: true });
}

async function refreshInvite({ first = false } = {}) {
  const state = store.invite;
  if (!state || store.view !== "invite") return;
  try {
    const room = await api.race(state.invite);
    if (store.invite !== state) return;
    state.room = room;
    state.error = null;
    if (first && isMember(room)) {
      state.busy = "join";
      renderInviteView();
      joinRace(room.invite);
      return;
    }
    if (location.pathname !== room.link) history.replaceState(null, "", room.link);
  } catch (err) {
    if (store.invite !== state) return;
    if (first || err.code !== "network") state.error = err.code;
  }
  renderInviteView();
}

function isMember(room) {
  const me = store.player;
  if (!me) return false;
  return (room.players || []).some((p) => p.player_id === me.id) || (room.results || []).some((r) => r.player_id === me.id);
}

function renderInviteView() {
  const state = store.invite;
  if (!state) return;
  renderInvite($("#view-invite"), state, store.player, {
    join: () => {
      state.busy = "join";
      state.joinError = null;
      renderInviteView();
      joinRace(state.room ? state.room.invite : state.invite);
    },
    watch: () => {
      state.busy = "watch";
      state.joinError = null;
      renderInviteView();
      joinRace(state.room ? state.room.invite : state.invite, { watch: true });
    },
    home: goHome,
    errorText,
  });
}

function applyRace(reply, { enter = false } = {}) {
  const room = reply.race;
  if (!store.race || store.race.invite !== room.invite) {
    store.race = { invite: room.invite, room, role: reply.role, offset: 0, progress: {} };
    store.game = null;
  }
  const race = store.race;
  if (room.version >= race.room.version) race.room = room;
  race.role = reply.role;
  measureOffset(race, room);
  if (location.pathname !== room.link) history.pushState(null, "", room.link);
  sessionSave(null);
  if (reply.game) {
    rememberRaceGame(reply.game.game_id, room.invite);
    setGame(reply.game);
  } else if (enter) {
    renderGame(null);
  }
  if (enter || store.view !== "play") {
    store.queue = [];
    setMessage("");
    showPlay();
    if (store.game) table.focusFirst();
  } else {
    renderRace();
  }
}

function leaveRaceContext() {
  store.race = null;
  renderRace();
}

async function startRace() {
  const race = store.race;
  if (!race) return;
  const reply = await conn.request({ type: "race_start", invite: race.invite });
  if (reply.type === "race") applyRace(reply);
  else setRaceError(reply.code);
}

async function leaveRace() {
  const race = store.race;
  if (!race) return;
  const reply = await conn.request({ type: "race_leave", invite: race.invite });
  if (reply.type === "race_left" || reply.type === "error") {
    store.game = null;
    leaveRaceContext();
    goHome();
  }
}

function setRaceError(code) {
  const panel = $("#race-panel");
  panel.append(h("p", { class: "error", role: "alert" }, errorText(code)));
}

function renderRace() {
  const race = store.race;
  const panel = $("#race-panel");
  panel.hidden = !race;
  $(".play-body").classList.toggle("with-race", !!race);
  $("#view-play").classList.toggle("racing", !!race);
  racePanel.render(race, store.player, store.game);
  if (store.game && store.view === "play") renderEnd(store.game, store.game);
}

// ------------------------------------------------------------------------------ leaderboard

function openLeaderboard(date) {
  show("leaderboard");
  leaderboard.open(date || null);
}

// ------------------------------------------------------------------------------ settings

function wireSettings() {
  const panel = $("#settings");
  const toggle = $("#nav-settings");
  const errorHelp = $("#set-error-help");
  const showPlayable = $("#set-show-playable");
  errorHelp.checked = store.errorHelp;
  showPlayable.checked = store.showPlayable;
  const setOpen = (open) => {
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    if (open) errorHelp.focus();
  };
  toggle.addEventListener("click", () => setOpen(panel.hidden));
  $("#settings-close").addEventListener("click", () => {
    setOpen(false);
    toggle.focus();
  });
  errorHelp.addEventListener("change", () => {
    store.errorHelp = errorHelp.checked;
    save(KEY.errorHelp, store.errorHelp);
    if (conn) conn.rehello();
  });
  showPlayable.addEventListener("change", () => {
    store.showPlayable = showPlayable.checked;
    save(KEY.showPlayable, store.showPlayable);
    if (store.game) renderGame(store.game);
  });
  const lang = $("#lang-select");
  lang.value = locale();
  lang.addEventListener("change", () => {
    save(KEY.locale, lang.value);
    setLocale(lang.value);
  });
}

function renderInviteNote() {
  const el = $("#register-invite");
  const invite = store.pendingInvite;
  el.hidden = !invite;
  el.textContent = invite ? t("register.invite", { invite: invite.toUpperCase() }) : "";
  const button = $("#register-submit");
  if (button && !button.disabled) button.textContent = invite ? t("register.submitJoin") : t("register.submit");
}

onLocaleChange(() => {
  $("#lang-select").value = locale();
  renderWho();
  renderInviteNote();
  timeLimitOptions();
  if (store.view === "invite") renderInviteView();
  if (conn) conn.rehello();
  if (store.view === "home") renderHome();
  if (store.game) renderGame(store.game);
  else if (store.race) renderGame(null);
  if (store.race) renderRace();
  if (store.view === "leaderboard") leaderboard.render();
  const banner = $("#conn-banner");
  if (!banner.hidden) banner.textContent = t("conn.offline");
});

// ------------------------------------------------------------------------------ keyboard

function onKey(ev) {
  if (store.view !== "play" || !store.game) return;
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return; // a held key plays once
  const target = ev.target;
  if (target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA")) return;
  const key = ev.key.toLowerCase();
  if (key === "d") {
    ev.preventDefault();
    act("draw");
  } else if (key === "u") {
    ev.preventDefault();
    act("undo");
  } else if (key === "h") {
    ev.preventDefault();
    hint();
  }
}

// ------------------------------------------------------------------------------ start

function routeFromLocation() {
  const m = location.pathname.match(/^\/race\/([^/]+)\/?$/);
  return m ? decodeURIComponent(m[1]) : null;
}

function boot() {
  setLocale(initialLocale(load(KEY.locale, null)));
  table = new Table($("#board"), {
    remove: (pos) => act("remove", pos),
    draw: () => act("draw"),
    undo: () => act("undo"),
  });
  racePanel = new RacePanel($("#race-panel"), {
    start: startRace,
    leave: leaveRace,
    home: goHome,
    replay: (code) => startGame({ type: "new_game", code }),
    newRace: () => {
      goHome();
      const details = $(".race-create");
      details.open = true;
      $("#race-code").focus();
    },
  });
  leaderboard = new Leaderboard($("#view-leaderboard"), {
    me: () => store.player,
    replay: (code) => startGame({ type: "new_game", code }),
    errorText,
  });
  timeLimitOptions();
  wireSettings();
  renderWho();

  $("#register-form").addEventListener("submit", register);
  $("#nav-home").addEventListener("click", () => (store.token ? goHome() : show("register")));
  $("#nav-leaderboard").addEventListener("click", () => openLeaderboard());
  $("#btn-leaderboard").addEventListener("click", () => openLeaderboard());
  $("#btn-daily").addEventListener("click", () => startGame({ type: "join_daily" }));
  $("#free-code-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const code = $("#free-code").value.trim();
    if (code) startGame({ type: "new_game", code }, { field: "free-code" });
    else codeError("free-code", errorText("bad_code"));
  });
  for (const field of ["free-code", "race-code"]) {
    $(`#${field}`).addEventListener("input", () => {
      if ($(`#${field}-error`).textContent) codeError(field, "");
    });
  }
  $("#btn-random").addEventListener("click", () => startGame({ type: "new_game", rules: $("#free-rules").value }));
  $("#race-join-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const invite = $("#race-invite").value.trim();
    if (invite) openInvite(invite);
    else homeError(errorText("bad_invite"));
  });
  $("#race-create-form").addEventListener("submit", createRace);
  $("#btn-resign").addEventListener("click", () => {
    $("#resign-confirm").hidden = false;
    $("#resign-no").focus();
  });
  $("#resign-yes").addEventListener("click", resign);
  $("#btn-hint").addEventListener("click", hint);
  $("#resign-no").addEventListener("click", () => {
    $("#resign-confirm").hidden = true;
    $("#btn-resign").focus();
  });
  document.addEventListener("keydown", onKey);
  window.addEventListener("popstate", () => {
    const invite = routeFromLocation();
    if (invite && store.token) openInvite(invite);
    else if (store.token) goHome();
  });
  setInterval(tick, 250);
  // The invite page follows the room (players arriving, the start) until the player chooses.
  setInterval(() => {
    const state = store.invite;
    if (store.view === "invite" && state && state.room && !state.busy && ["lobby", "running"].includes(state.room.status)) {
      refreshInvite();
    }
  }, 3000);

  store.pendingInvite = routeFromLocation();
  renderInviteNote();
  if (!store.token) {
    show("register");
    $("#register-name").focus();
    return;
  }
  connect();
  if (store.pendingInvite) openInvite(store.pendingInvite);
  else show("home");
}

// For tests and debugging: the connection (to drop it and watch it come back) and the state.
window.tripeaks = {
  get store() {
    return store;
  },
  get connection() {
    return conn;
  },
};

boot();
