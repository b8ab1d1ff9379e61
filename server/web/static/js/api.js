// The REST API under /api/v1 (docs/protocol.md §12). Errors become ApiError(code).

export class ApiError extends Error {
  constructor(code, status, message) {
    super(message || code);
    this.code = code;
    this.status = status;
  }
}

async function call(method, path, { body, token } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  let resp;
  try {
    resp = await fetch(`/api/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new ApiError("network", 0, String(err));
  }
  let data = null;
  try {
    data = await resp.json();
  } catch (err) {
    data = null;
  }
  if (!resp.ok) {
    const error = data && data.error ? data.error : { code: `http_${resp.status}`, message: "" };
    throw new ApiError(error.code, resp.status, error.message);
  }
  return data;
}

export const api = {
  register: (name) => call("POST", "/players", { body: { name } }),
  me: (token) => call("GET", "/players/me", { token }),
  player: (id) => call("GET", `/players/${encodeURIComponent(id)}`),
  signIn: (name, recoveryCode) => call("POST", "/sessions", { body: { name, recovery_code: recoveryCode } }),
  newRecoveryCode: (token) => call("POST", "/players/me/recovery-code", { token }),
  signOutOthers: (token) => call("DELETE", "/players/me/sessions?keep=current", { token }),
  daily: (date) => call("GET", date ? `/daily/${encodeURIComponent(date)}` : "/daily"),
  leaderboard: (date, { limit = 50, cursor = null } = {}) => {
    const q = new URLSearchParams({ limit: String(limit) });
    if (cursor) q.set("cursor", cursor);
    return call("GET", `/daily/${encodeURIComponent(date)}/leaderboard?${q}`);
  },
  around: (date, playerId, radius = 3) =>
    call("GET", `/daily/${encodeURIComponent(date)}/leaderboard/around/${playerId}?radius=${radius}`),
  replay: (id) => call("GET", `/games/${encodeURIComponent(id)}/replay`),
  following: (token) => call("GET", "/players/me/following", { token }),
  follow: (token, playerId) => call("PUT", `/players/me/following/${encodeURIComponent(playerId)}`, { token }),
  followName: (token, name) => call("POST", "/players/me/following", { token, body: { name } }),
  unfollow: (token, playerId) => call("DELETE", `/players/me/following/${encodeURIComponent(playerId)}`, { token }),
  friendsBoard: (date, token) => call("GET", `/daily/${encodeURIComponent(date)}/leaderboard/friends`, { token }),
  periodBoard: (kind, period, { limit = 50, cursor = null } = {}) => {
    const q = new URLSearchParams({ limit: String(limit) });
    if (cursor) q.set("cursor", cursor);
    return call("GET", `/boards/${kind}/${encodeURIComponent(period)}?${q}`);
  },
  periodAround: (kind, period, playerId, radius = 3) =>
    call("GET", `/boards/${kind}/${encodeURIComponent(period)}/around/${playerId}?radius=${radius}`),
  periodFriends: (kind, period, token) => call("GET", `/boards/${kind}/${encodeURIComponent(period)}/friends`, { token }),
  ladder: (rules, { limit = 50, cursor = null } = {}) => {
    const q = new URLSearchParams({ limit: String(limit) });
    if (cursor) q.set("cursor", cursor);
    return call("GET", `/ladder/${encodeURIComponent(rules)}?${q}`);
  },
  ladderAround: (rules, playerId, radius = 3) =>
    call("GET", `/ladder/${encodeURIComponent(rules)}/around/${encodeURIComponent(playerId)}?radius=${radius}`),
  ladderFriends: (rules, token) => call("GET", `/ladder/${encodeURIComponent(rules)}/friends`, { token }),
  ratings: (playerId) => call("GET", `/players/${encodeURIComponent(playerId)}/ratings`),
  game: (id, token) => call("GET", `/games/${encodeURIComponent(id)}`, { token }),
  race: (invite) => call("GET", `/races/${encodeURIComponent(invite)}`),
};
