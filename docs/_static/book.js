// The course book's own script (docs/conf.py). Every region that scrolls — a code block, an
// output, a display formula or a table wider than the page — takes the keyboard focus
// (tabindex 0), so the arrow keys scroll it (WCAG 2.1.1). Checked when the page has loaded,
// again when the web fonts are in (they can widen text after the load) and on resize.
(function () {
  const regions = "pre, .math-display, .cell_output .output, .pst-scrollable-table-container";
  function markScrollable() {
    document.querySelectorAll(regions).forEach((el) => {
      if (el.scrollWidth > el.clientWidth || el.scrollHeight > el.clientHeight) {
        el.tabIndex = 0;
      }
    });
  }
  window.addEventListener("load", markScrollable);
  window.addEventListener("resize", markScrollable);
  if (document.fonts) {
    document.fonts.ready.then(markScrollable);
  }
})();
