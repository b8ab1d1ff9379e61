// The recovery code panel under the top bar: a code the server has just made (at registration,
// or "New recovery code" in the settings) is shown once, with what it is for, a Copy button and
// a Download button (a .txt file). The page keeps no copy: closing the panel forgets it.
import { copyText } from "../code.js";
import { $ } from "../dom.js";
import { t } from "../i18n.js";

let shown = null; // {code, name} while the panel is open

export function initRecovery() {
  $("#recovery-copy").addEventListener("click", async () => {
    if (!shown) return;
    const done = await copyText(shown.code, $("#recovery-code"));
    $("#recovery-status").textContent = t(done === "copied" ? "recovery.copied" : "code.selected");
  });
  $("#recovery-download").addEventListener("click", () => {
    if (shown) download(shown);
  });
  $("#recovery-done").addEventListener("click", hideRecovery);
}

/** Show `code`, the recovery code of the player called `name`, until the player closes it. */
export function showRecovery(code, name) {
  shown = { code, name };
  $("#recovery-code").textContent = code;
  $("#recovery-status").textContent = "";
  render();
  const panel = $("#recovery");
  panel.hidden = false;
  panel.scrollIntoView({ block: "nearest" });
  $("#recovery-copy").focus();
}

/** Close the panel and forget the code. */
export function hideRecovery() {
  shown = null;
  $("#recovery-code").textContent = "";
  $("#recovery-status").textContent = "";
  $("#recovery").hidden = true;
}

/** The panel's texts in the current language. */
export function renderRecovery() {
  if (shown) render();
}

function render() {
  $("#recovery-explain").textContent = t("recovery.explain", { name: shown.name });
}

function download({ code, name }) {
  const text = `${t("recovery.file", { name, code })}\n`;
  const url = URL.createObjectURL(new Blob([text], { type: "text/plain;charset=utf-8" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = t("recovery.fileName");
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
