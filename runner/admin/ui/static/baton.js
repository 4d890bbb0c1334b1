// baton's run and fleet views: refresh the live part of a page while it
// changes, open a node's details on click, confirm a cancel. No library.
//
// Nothing the page holds as a string (a node id from the address bar, a
// message) becomes markup: it goes into the DOM as text. The only HTML the
// script inserts is a fragment this server rendered (html/template, every
// value escaped) and answered to a same-origin fetch, and it goes through
// the one Trusted Types policy the page's content policy allows, so any
// other innerHTML assignment is refused by the browser.
(function () {
  "use strict";
  var serverPolicy = window.trustedTypes && window.trustedTypes.createPolicy
    ? window.trustedTypes.createPolicy("baton", {createHTML: function (s) { return s; }})
    : {createHTML: function (s) { return s; }};

  // serverHTML puts a fragment this server answered into el; anything
  // else (another origin, not HTML) is refused.
  function serverHTML(el, r, text) {
    var type = r.headers.get("Content-Type") || "";
    if (new URL(r.url, location.href).origin !== location.origin || type.indexOf("text/html") !== 0) return false;
    el.innerHTML = serverPolicy.createHTML(text);
    return true;
  }

  // message replaces el's content with one paragraph of plain text.
  function message(el, cls, text) {
    var p = document.createElement("p");
    p.className = cls;
    p.textContent = text;
    el.replaceChildren(p);
  }

  var live = document.getElementById("live");
  var detail = document.getElementById("detail");
  var selected = null;

  function markSelected() {
    if (!live) return;
    var nodes = live.querySelectorAll("svg .node");
    for (var i = 0; i < nodes.length; i++) {
      nodes[i].classList.toggle("selected", nodes[i].getAttribute("data-node") === selected);
    }
  }

  // A node's URL is its run's page with #node=ID: opening it shows the
  // node, and showing a node puts it in the address bar.
  function hashNode() {
    var m = /^#node=(.+)$/.exec(location.hash);
    return m ? decodeURIComponent(m[1]) : null;
  }

  function showNode(id) {
    if (!detail || !id) return;
    selected = id;
    if (hashNode() !== id && history.replaceState) history.replaceState(null, "", "#node=" + encodeURIComponent(id));
    markSelected();
    fetch(detail.getAttribute("data-base") + encodeURIComponent(id), {credentials: "same-origin"})
      .then(function (r) { return r.text().then(function (t) { return {resp: r, text: t}; }); })
      .then(function (r) {
        if (!r.resp.ok || !serverHTML(detail, r.resp, r.text)) message(detail, "error", "Could not load node " + id);
      })
      .catch(function () {});
  }

  document.addEventListener("click", function (ev) {
    var t = ev.target.closest ? ev.target.closest("[data-node]") : null;
    if (!t) return;
    if (t.matches("svg .node, a.pick")) {
      ev.preventDefault();
      showNode(t.getAttribute("data-node"));
    }
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter" && ev.target.matches && ev.target.matches("svg .node")) {
      showNode(ev.target.getAttribute("data-node"));
    }
  });
  document.addEventListener("submit", function (ev) {
    var msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  if (detail && hashNode()) showNode(hashNode());
  window.addEventListener("hashchange", function () { if (hashNode()) showNode(hashNode()); });

  // Poll the page's live fragment every second while it is active; a run
  // page stops once the run has ended (after showing that).
  if (live && live.getAttribute("data-src")) {
    var busy = false;
    var tick = function () {
      if (busy || document.hidden) return;
      busy = true;
      fetch(live.getAttribute("data-src"), {credentials: "same-origin"})
        .then(function (r) {
          if (r.status === 401) { window.location = "/login?next=" + encodeURIComponent(location.pathname); }
          return r.ok ? r.text().then(function (t) { return {resp: r, text: t}; }) : null;
        })
        .then(function (got) {
          busy = false;
          if (!got || !serverHTML(live, got.resp, got.text)) return;
          markSelected();
          var s = live.querySelector(".summary[data-active]");
          var active = s ? s.getAttribute("data-active") === "true" : true;
          live.setAttribute("data-active", String(active));
          if (!active) {
            clearInterval(timer);
            var c = document.querySelector("form.cancel");
            if (c) c.remove();
            if (selected) showNode(selected);
          }
          live.setAttribute("data-refreshed", String(Date.now()));
        })
        .catch(function () { busy = false; });
    };
    var timer = null;
    if (live.getAttribute("data-active") === "true") timer = setInterval(tick, 1000);
  }
})();
