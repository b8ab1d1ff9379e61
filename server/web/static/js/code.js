// Game codes on the page: TP1-E-ABCDEFG, or TP2-E-ABCDEFG-HIJKLMN-OPQRSTU-VWXYZAB (28 letters in
// four groups of 7). A code is shown in monospace chunks that never break inside a group and
// wrap only after a group's hyphen, with a "Copy" button that confirms in a live region.
import { h } from "./dom.js";
import { t } from "./i18n.js";

const GROUP = 7;

/**
 * The pieces a code may wrap between: "TP2-E-ABCDEFG-", "HIJKLMN-", "OPQRSTU-", "VWXYZAB".
 * A TP1 code is one piece. A TP2 code that arrives without its group hyphens is grouped here.
 */
export function codeChunks(code) {
  const text = String(code);
  const parts = text.split("-");
  if (parts.length < 3) return [text];
  const head = parts.slice(0, 2).join("-");
  let groups = parts.slice(2);
  if (groups.length === 1 && groups[0].length > GROUP && groups[0].length % GROUP === 0) {
    groups = groups[0].match(new RegExp(`.{${GROUP}}`, "g"));
  }
  return groups.map((group, i) => `${i === 0 ? `${head}-` : ""}${group}${i < groups.length - 1 ? "-" : ""}`);
}

/** The code as shown (its groups joined by "-"): what the copy button copies. */
export function codeString(code) {
  return codeChunks(code).join("");
}

/** An inline element with the code in unbreakable chunks; line breaks only between them. */
export function codeText(code, attrs = {}) {
  const el = h("span", { ...attrs, class: `game-code${attrs.class ? ` ${attrs.class}` : ""}`, translate: "no" });
  codeChunks(code).forEach((chunk, i) => {
    if (i > 0) el.append(document.createElement("wbr"));
    el.append(h("span", { class: "code-chunk" }, chunk));
  });
  return el;
}

/**
 * Put `text` on the clipboard; without the clipboard API, select `target`'s text (an element
 * on the page) and copy it with the older copy command where the browser still allows it.
 * Resolves with what happened: "copied", or "selected" (the player copies it by hand).
 */
export async function copyText(text, target) {
  if (await writeClipboard(text)) return "copied";
  let copied = false;
  if (target && target.isConnected) {
    selectText(target);
    try {
      copied = document.execCommand("copy");
    } catch (err) {
      copied = false;
    }
  }
  return copied ? "copied" : "selected";
}

async function writeClipboard(text) {
  if (!navigator.clipboard || typeof navigator.clipboard.writeText !== "function") return false;
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (err) {
    return false;
  }
}

/** Select the code's text on the page, so the player can copy it by hand. */
function selectText(el) {
  const range = document.createRange();
  range.selectNodeContents(el);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

/**
 * A "Copy" button for `code`, with a live region that says "Copied" for a moment. Without the
 * clipboard API the code's text (`target`, an element made by codeText) is selected instead,
 * and copied with the older copy command where the browser still allows it.
 */
export function copyControl(code, target, { id = null } = {}) {
  const text = codeString(code);
  const status = h("span", { class: "copy-status", role: "status", "aria-live": "polite" });
  let timer = null;
  const say = (message) => {
    status.textContent = message;
    clearTimeout(timer);
    timer = setTimeout(() => (status.textContent = ""), 2500);
  };
  const button = h(
    "button",
    {
      type: "button",
      class: "copy-code",
      id,
      "aria-label": t("code.copyLabel"),
      dataset: { code: text },
      onclick: async () => {
        const done = await copyText(text, target);
        say(t(done === "copied" ? "code.copied" : "code.selected"));
      },
    },
    t("code.copy"),
  );
  return h("span", { class: "code-copy" }, button, status);
}

/**
 * A line showing a code inside a sentence (`nodes`, from tNodes with the codeText element),
 * followed by its copy button. `textId` names the sentence's element.
 */
export function codeLine(nodes, code, target, { textId = null, copyId = null, cls = "" } = {}) {
  return h(
    "div",
    { class: `code-line${cls ? ` ${cls}` : ""}` },
    h("p", { id: textId, class: "code-text" }, nodes),
    copyControl(code, target, { id: copyId }),
  );
}
