// What the page tells the player besides its views: a server error code in words, the table's
// message line, the screen reader's announcements, the menu's errors (its own line and the
// one under each game-code field), a failed read with its Try again, and the invitations to
// races (Join / Dismiss).
import { $, clear, h } from "../dom.js";
import { has, t } from "../i18n.js";
import { store } from "../store.js";

let messageTimer = null;

/**
 * An error (docs/protocol.md) in the player's language: its code, or the error reply itself
 * ({code, ...}), whose members some texts name (a ban's date and reason).
 */
export function errorText(error) {
  const reply = typeof error === "object" && error !== null ? error : { code: error };
  const code = reply.code;
  if (code === "banned" && reply.ban) return t("err.banned", { since: reply.ban.since, reason: reply.ban.reason });
  if (code === "banned") return t("err.bannedNoReason");
  return has(`err.${code}`) ? t(`err.${code}`) : t("err.generic", { code });
}

/** The table's message line (empty: clear it); a message goes away after a while. */
export function setMessage(text) {
  const el = $("#message");
  el.textContent = text || "";
  clearTimeout(messageTimer);
  if (text) messageTimer = setTimeout(() => (el.textContent = ""), 6000);
}

/** Say `text` to a screen reader (politely, after what it is reading). */
export function announce(text) {
  $("#announce").textContent = text;
}

/** The menu's error line (empty: clear it). */
export function homeError(text) {
  const el = $("#home-error");
  el.textContent = text || "";
  if (text) el.scrollIntoView({ block: "nearest" });
}

/** A typed code the server refused: its own message, and longer than the protocol's 64
 * characters reads as an invalid code too. */
export function codeErrorText(code) {
  return errorText(code === "invalid_message" ? "bad_code" : code);
}

/** Show (or clear) an error under a code field: "free-code" or "race-code". */
export function codeError(field, text) {
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

/**
 * The invitations to races I got (store.invitations), each a notice with Join and Dismiss.
 * @param {object} on  {join(invite), dismiss(invite)}
 */
export function renderInvitations(on) {
  const box = clear($("#invitations"));
  for (const invitation of store.invitations) {
    const { invite, from } = invitation;
    box.append(
      h(
        "div",
        { class: "invitation", role: "status", dataset: { invite } },
        h("span", {}, t("friends.invitedBy", { name: from.name, invite })),
        h("button", { type: "button", class: "primary invitation-join", onclick: () => on.join(invite) }, t("friends.join")),
        h("button", { type: "button", class: "invitation-dismiss", onclick: () => on.dismiss(invite) }, t("friends.dismiss")),
      ),
    );
  }
  box.hidden = store.invitations.length === 0;
}

/** A read that failed: `text` says what failed, with a Try again button (`retry`). */
export function failedNotice(id, text, retry) {
  return h(
    "div",
    { class: "failed", id, role: "alert" },
    h("p", { class: "error" }, text),
    h("button", { type: "button", class: "retry", onclick: retry }, t("common.retry")),
  );
}
