  // The pages' shared start (page_base.js, spliced in by fill_page): errors shown on the page
  // and counted in body[data-errors] (the browser tests read it), the data, element helpers.
  const errors = [];
  function fail(msg) {
    errors.push(String(msg));
    document.body.dataset.errors = String(errors.length);
    document.getElementById("errors").textContent = "Error: " + errors.join("; ");
  }
  window.addEventListener("error", (ev) => fail(ev.message));

  const D = JSON.parse(document.getElementById("sprofil-data").textContent);
  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const svgEl = (tag, attrs) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  };
