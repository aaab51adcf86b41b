// The browser-side twin of page.py's parser: the same PageView rules read from the live DOM.
// Run through Selenium's execute_script; returns plain arrays so Python can rebuild the view.
const INVISIBLE = "script,style,head,title,meta,noscript";
const nodes = [];
const walker = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const parent = node.parentElement;
  const text = node.nodeValue.trim();
  if (!text || !parent || parent.closest(INVISIBLE)) continue;
  const tag = parent.tagName.toLowerCase();
  if (tag === "button") {
    nodes.push([text, "button", false]);
  } else if (tag === "label") {
    const radio = parent.htmlFor ? document.getElementById(parent.htmlFor) : null;
    nodes.push([text, "option", Boolean(radio && radio.checked)]);
  } else if (parent.className.trim().split(/\s+/).join(" ") === "product-link") {
    nodes.push([text, "product", parent.hasAttribute("data-visited")]);
  } else {
    nodes.push([text, "text", false]);
  }
}
const clickables = [];
document.querySelectorAll(".btn, .product-link, input[type=radio]").forEach((el, index) => {
  if (el.matches("input[type=radio]")) {
    clickables.push([el.value.toLowerCase(), "option", el.getAttribute("data-url") || "", "GET",
                     index, el.checked]);
  } else if (el.classList.contains("product-link")) {
    clickables.push([el.textContent.trim().toLowerCase(), "product",
                     el.getAttribute("href") || "", "GET", index, false]);
  } else {
    const form = el.closest("form");
    clickables.push([el.textContent.trim().toLowerCase(), "button",
                     form ? form.getAttribute("action") || "" : "",
                     form ? (form.getAttribute("method") || "get").toUpperCase() : "GET",
                     index, false]);
  }
});
const search = document.getElementById("search_input");
const searchForm = search ? search.closest("form") : null;
const meta = {};
for (const attr of document.body.attributes) {
  if (attr.name.startsWith("data-")) meta[attr.name.slice(5)] = attr.value;
}
return {
  nodes: nodes,
  clickables: clickables,
  has_search_bar: Boolean(search),
  search_action: searchForm ? searchForm.getAttribute("action") : null,
  meta: meta,
};
