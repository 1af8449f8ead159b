// The token both pages send to a server that authenticates its callers (reactor-server --auth …):
// typed into the page's "Token" field and kept in this tab's sessionStorage. With one set, every
// fetch carries `Authorization: Bearer <token>`, and an EventSource URL (EventSource cannot send
// headers) carries `access_token=<token>`, which the server reads with --auth-query-token; a
// server that names a cookie (--auth-cookie) reads the browser's cookie instead. Without a token
// nothing is added. Loaded before the page's own script, which uses `auth`.
"use strict";

const auth = (() => {
  const KEY = "reactor-server.token";
  const field = document.getElementById("token");
  const form = document.getElementById("token-form");
  const listeners = [];

  function token() {
    try {
      return sessionStorage.getItem(KEY) || "";
    } catch {
      return ""; // storage disabled: no token
    }
  }

  function setToken(value) {
    const trimmed = value.trim();
    try {
      if (trimmed) sessionStorage.setItem(KEY, trimmed); else sessionStorage.removeItem(KEY);
    } catch {
      // storage disabled: the token lasts as long as the page does not reload
    }
    for (const listener of listeners) listener(trimmed);
  }

  if (field) {
    field.value = token();
    const save = () => { if (field.value.trim() !== token()) setToken(field.value); };
    field.addEventListener("change", save);
    form?.addEventListener("submit", (event) => { event.preventDefault(); save(); });
  }

  return {
    token,

    // Calls `listener` with the new token (empty: none) each time the field changes it.
    onChange(listener) { listeners.push(listener); },

    // `fetch`, with the token's Authorization header when there is one.
    fetch(resource, options = {}) {
      const current = token();
      if (!current) return fetch(resource, options);
      const headers = new Headers(options.headers || {});
      headers.set("Authorization", `Bearer ${current}`);
      return fetch(resource, { ...options, headers });
    },

    // The URL of an event stream at `path` (which may have a query), with the token as
    // `access_token` when there is one.
    eventSourceURL(path) {
      const current = token();
      if (!current) return path;
      return `${path}${path.includes("?") ? "&" : "?"}access_token=${encodeURIComponent(current)}`;
    },

    // What to say about a `401`: a token is needed, or the one given was refused (`problem` is the
    // answer's problem+json, if any). Moves the focus to the token field.
    askForToken(problem) {
      field?.focus();
      if (!token()) return "This server needs a token: enter one in the Token field.";
      const detail = problem && problem.detail ? ` (${problem.detail})` : "";
      return `The server refused the token${detail}. Enter a valid one in the Token field.`;
    },
  };
})();
