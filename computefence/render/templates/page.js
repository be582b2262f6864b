// Copy buttons, pod table sorting and filters. The page reads the same without this.
(function () {
  "use strict";
  function copyText(text, button) {
    function done() { button.textContent = "Copied"; setTimeout(function () { button.textContent = "Copy"; }, 1500); }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, function () { fallback(text); done(); });
    } else { fallback(text); done(); }
  }
  function fallback(text) {
    var area = document.createElement("textarea");
    area.value = text; document.body.appendChild(area); area.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing else to try */ }
    area.remove();
  }
  // One listener for every copy button; the buttons show only where this script runs.
  document.documentElement.classList.add("js");
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".fix .copy");
    if (button) copyText(button.parentNode.querySelector("pre").textContent, button);
  });

  var table = document.getElementById("pod-table");
  var filters = document.getElementById("pod-filters");
  if (table && filters) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var shown = document.getElementById("pod-shown");
    var selects = filters.querySelectorAll("select");
    var search = filters.querySelector("input");
    function apply() {
      var text = search.value.trim().toLowerCase(), count = 0;
      rows.forEach(function (row) {
        var ok = Array.prototype.every.call(selects, function (select) {
          var want = select.value, key = select.name;
          if (!want) return true;
          return key === "tag" ? (row.dataset.tag || "").split("\n").indexOf(want) >= 0 : row.dataset[key] === want;
        });
        if (ok && text) ok = row.textContent.toLowerCase().indexOf(text) >= 0;
        row.hidden = !ok; if (ok) count += 1;
      });
      shown.textContent = count + " of " + rows.length + " pods shown";
    }
    selects.forEach(function (s) { s.addEventListener("change", apply); });
    search.addEventListener("input", apply);
    filters.hidden = false;
    apply();

    table.querySelectorAll("th[data-sort]").forEach(function (th, _) {
      var label = th.textContent;
      var button = document.createElement("button");
      button.type = "button"; button.className = "sort"; button.textContent = label;
      th.textContent = ""; th.appendChild(button);
      button.addEventListener("click", function () {
        var index = th.cellIndex, numeric = th.dataset.sort === "num";
        var direction = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        table.querySelectorAll("th[aria-sort]").forEach(function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", direction === 1 ? "ascending" : "descending");
        var sorted = rows.slice().sort(function (a, b) {
          var x = a.cells[index].dataset.value || a.cells[index].textContent;
          var y = b.cells[index].dataset.value || b.cells[index].textContent;
          if (numeric) return direction * ((parseFloat(x) || -1) - (parseFloat(y) || -1));
          return direction * x.localeCompare(y, undefined, { numeric: true });
        });
        sorted.forEach(function (row) { body.appendChild(row); });
      });
    });
  }
  // A wide status matrix opens on its newest runs (the right-hand end).
  document.querySelectorAll(".scroll-end").forEach(function (box) { box.scrollLeft = box.scrollWidth; });
  // Paper gets every folded section open.
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
})();
