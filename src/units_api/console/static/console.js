// Progressive help for the console's pages; every page works without it.
"use strict";

// The map of results: drag a rectangle to fill the box filter, then apply it.
function setUpMap() {
  const map = document.getElementById("map");
  const form = document.getElementById("filters");
  if (!map || !form) return;
  const box = document.getElementById("map-box");
  const size = 256 * Math.pow(2, parseInt(map.dataset.zoom, 10));
  const view = map.viewBox.baseVal;
  let start = null;

  // A point of the map in its own coordinates (Web Mercator pixels at its zoom), kept inside
  // the frame, with the longitude and latitude it stands for (console/maps.py's inverse).
  function local(event) {
    const point = map.createSVGPoint();
    point.x = event.clientX;
    point.y = event.clientY;
    const inner = point.matrixTransform(map.getScreenCTM().inverse());
    const x = Math.min(Math.max(inner.x, view.x), view.x + view.width);
    const y = Math.min(Math.max(inner.y, view.y), view.y + view.height);
    const lat = Math.atan(Math.sinh(Math.PI * (1 - (2 * y) / size))) * (180 / Math.PI);
    return { x: x, y: y, lng: (x / size) * 360 - 180, lat: lat };
  }

  function draw(a, b) {
    box.setAttribute("x", Math.min(a.x, b.x));
    box.setAttribute("y", Math.min(a.y, b.y));
    box.setAttribute("width", Math.abs(a.x - b.x));
    box.setAttribute("height", Math.abs(a.y - b.y));
  }

  map.addEventListener("pointerdown", (event) => {
    if (event.target.closest("a")) return;
    start = local(event);
    map.setPointerCapture(event.pointerId);
    event.preventDefault();
  });
  map.addEventListener("pointermove", (event) => {
    if (start) draw(start, local(event));
  });
  map.addEventListener("pointerup", (event) => {
    if (!start) return;
    const end = local(event);
    const from = start;
    start = null;
    if (Math.abs(end.x - from.x) < 4 || Math.abs(end.y - from.y) < 4) return;
    const round = (value) => value.toFixed(5);
    form.elements.west.value = round(Math.min(from.lng, end.lng));
    form.elements.east.value = round(Math.max(from.lng, end.lng));
    form.elements.south.value = round(Math.min(from.lat, end.lat));
    form.elements.north.value = round(Math.max(from.lat, end.lat));
    form.requestSubmit();
  });
}

// A job still running: look again in a few seconds (the page says so in its text too).
function refreshRunningJobs() {
  const running = document.querySelector("[data-refresh]");
  if (running) setTimeout(() => window.location.reload(), parseInt(running.dataset.refresh, 10));
}

document.addEventListener("DOMContentLoaded", () => {
  setUpMap();
  refreshRunningJobs();
});
