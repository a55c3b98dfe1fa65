// Drives Debian's chromium (headless, through playwright-core) over kompakt's log map page.
// Usage: node map_check.js '<json config>'; prints one JSON line of findings, exits 1 on failure.
//
// config.mode "live": open config.url (the admin endpoint's /), check config.partition shows a
//   cleanable dirty section and the dirty ratio config.expectedRatio, POST config.compactUrl,
//   wait until the dirty section is gone and the last-clean stats appear, open the detail view,
//   take the screenshots config.screenshots. Only requests to the admin endpoint are allowed.
// config.mode "static": open config.url (a file:// page), allow file:// requests only, check that
//   every partition of config.expectPartitions is drawn, take the screenshots.
"use strict";

const { chromium } = require("playwright-core");

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

function fail(message) {
  throw new Error(message);
}

async function waitFor(page, fn, arg, what, timeout) {
  try {
    await page.waitForFunction(fn, arg, { timeout: timeout || 15000, polling: 100 });
  } catch (e) {
    fail("timed out waiting for " + what + ": " + e.message.split("\n")[0]);
  }
}

async function shoot(page, paths) {
  for (const path of paths || []) await page.screenshot({ path: path, fullPage: true });
}

async function live(page, config, out) {
  const origin = new URL(config.url).origin;
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(origin + "/")) return route.continue();
    out.blocked.push(url);
    return route.abort();
  });
  await page.goto(config.url);
  const row = '[data-partition="' + config.partition + '"]';
  await waitFor(page, (sel) => !!document.querySelector(sel + ' .seg[data-section="cleanable"]'), row, "a cleanable dirty section of " + config.partition);
  out.ratioText = (await page.textContent(row + " .ratio-text")).trim();
  if (out.ratioText !== config.expectedRatio) fail("dirty ratio shown " + out.ratioText + ", expected " + config.expectedRatio);
  out.verdictBefore = (await page.textContent(row + " .verdict")).trim();
  out.sectionsBefore = await page.$$eval(row + " .seg", (els) => els.map((e) => e.dataset.section));
  out.order = await page.$$eval("[data-partition]", (els) => els.map((e) => e.dataset.partition));

  // The search box narrows the list.
  await page.fill("#search", config.partition);
  out.searchHits = await page.$$eval("[data-partition]", (els) => els.map((e) => e.dataset.partition));
  await page.fill("#search", "");

  const response = await fetch(config.compactUrl, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...(config.token ? { Authorization: "Bearer " + config.token } : {}) },
  });
  if (!response.ok) fail("compact now answered HTTP " + response.status);
  out.compact = await response.json();

  await waitFor(
    page,
    (sel) => {
      const el = document.querySelector(sel);
      return !!el && !el.querySelector('.seg[data-section="cleanable"]') && !!el.querySelector(".last-clean");
    },
    row,
    "the dirty section of " + config.partition + " to go and its last-clean stats to appear",
  );
  out.sectionsAfter = await page.$$eval(row + " .seg", (els) => els.map((e) => e.dataset.section));
  out.lastClean = (await page.textContent(row + " .last-clean")).trim();

  // The detail view: segments, last clean, records before and after with the removed ones struck out.
  await page.click(row + " button.name");
  await waitFor(page, () => !!document.querySelector("#detail .samples del"), null, "the before/after record samples");
  out.detailSegments = await page.$$eval("#detail table.segments tbody tr", (els) => els.length);
  out.struckOut = await page.$$eval("#detail .samples del", (els) => els.length);
  out.detailText = (await page.textContent("#detail")).slice(0, 4000);

  // The detail view's key lookup: the latest value and where it lives, its segment marked.
  if (config.lookupKey) {
    await page.fill("#lookup-key", config.lookupKey);
    await page.click("#lookup-form button[type=submit]");
    await waitFor(page, () => !!document.querySelector("#lookup-result dl"), null, "the lookup's answer");
    out.lookupText = (await page.textContent("#lookup-result")).trim();
    await waitFor(page, () => !!document.querySelector("#detail table.segments tr.has-key"), null, "the key's segment marked");
    out.keySegmentRows = await page.$$eval("#detail table.segments tr.has-key", (els) => els.map((e) => e.dataset.baseOffset));
    await shoot(page, config.lookupScreenshots);
    await page.fill("#lookup-key", config.missingKey);
    await page.click("#lookup-form button[type=submit]");
    await waitFor(page, () => /is not in/.test(document.querySelector("#lookup-result").textContent), null, "the missing key's answer");
    out.missingText = (await page.textContent("#lookup-result")).trim();
  }
  await shoot(page, config.screenshots);
}

async function staticPage(page, config, out) {
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith("file://")) return route.continue();
    out.blocked.push(url);
    return route.abort();
  });
  await page.goto(config.url);
  await waitFor(page, (n) => document.querySelectorAll("[data-partition]").length >= n, config.expectPartitions.length, "every partition");
  out.partitions = await page.$$eval("[data-partition]", (els) => els.map((e) => e.dataset.partition));
  for (const name of config.expectPartitions) if (out.partitions.indexOf(name) < 0) fail("partition " + name + " is not drawn");
  out.sections = await page.$$eval(".seg", (els) => Array.from(new Set(els.map((e) => e.dataset.section))).sort());
  out.status = (await page.textContent("#status")).trim();
  // The offsets scale and the detail view work offline too.
  await page.check('input[name="scale"][value="offsets"]');
  await page.click('[data-partition="' + config.expectPartitions[0] + '"] button.name');
  await waitFor(page, () => !!document.querySelector("#detail table.segments"), null, "the detail view");
  out.lookupHidden = await page.$eval("#lookup", (el) => el.hidden);
  out.lookupOffline = await page.$eval("#lookup-offline", (el) => el.textContent);
  await shoot(page, config.screenshots);
}

// config.mode "layout": open config.url (live) at each width of config.widths; report the rows drawn
//   by default and with "show internal and empty partitions", horizontal overflow of the page, of
//   each bar and of the detail view's tables, and whether every bar fills its row.
async function layout(page, config, out) {
  const origin = new URL(config.url).origin;
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(origin + "/")) return route.continue();
    out.blocked.push(url);
    return route.abort();
  });
  out.widths = {};
  for (const width of config.widths) {
    await page.setViewportSize({ width: width, height: 900 });
    await page.goto(config.url);
    await waitFor(page, () => !!document.querySelector("[data-partition]"), null, "a partition row");
    const found = {};
    found.shown = await page.$$eval("[data-partition]", (els) => els.map((e) => e.dataset.partition));
    found.count = (await page.textContent("#count")).trim();
    const measure = () =>
      page.evaluate(() => {
        const doc = document.documentElement;
        const bars = Array.from(document.querySelectorAll(".bar")).map((b) => {
          const r = b.getBoundingClientRect(), w = b.parentElement.getBoundingClientRect();
          return { over: r.right - w.right, fill: r.width / w.width };
        });
        // Each partition's active segment, even an empty one, takes visible width in its bar.
        const active = {};
        for (const row of document.querySelectorAll("[data-partition]")) {
          const seg = row.querySelector('.seg[data-section="active"]');
          active[row.dataset.partition] = seg ? seg.getBoundingClientRect().width : 0;
        }
        return {
          pageOverflow: doc.scrollWidth - doc.clientWidth,
          barOverflow: Math.max(0, ...bars.map((b) => b.over)),
          minFill: Math.min(1, ...bars.map((b) => b.fill)),
          activeWidth: active,
        };
      });
    Object.assign(found, await measure());
    await page.check("#show-hidden");
    found.shownAll = await page.$$eval("[data-partition]", (els) => els.length);
    found.afterToggle = await measure();
    await page.uncheck("#show-hidden");
    await page.click('[data-partition="' + config.partition + '"] button.name');
    await waitFor(page, () => !!document.querySelector("#detail table.segments"), null, "the detail view");
    found.detail = await page.evaluate(() => {
      const d = document.getElementById("detail");
      const tables = Array.from(d.querySelectorAll("table")).map((t) => t.getBoundingClientRect().right - d.getBoundingClientRect().right);
      // The segment table fits: no row wraps to a second line (every row as tall as the header).
      const seg = d.querySelector("table.segments");
      const heights = Array.from(seg.querySelectorAll("tr")).map((r) => r.getBoundingClientRect().height);
      const wrap = seg.parentElement;
      return {
        overflow: d.scrollWidth - d.clientWidth,
        segmentRowHeights: heights,
        segmentTableScroll: wrap.scrollWidth - wrap.clientWidth,
        tableOverflow: Math.max(0, ...tables),
        pageOverflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      };
    });
    await shoot(page, (config.screenshots || []).map((p) => p.replace(".png", "-" + width + ".png")));
    out.widths[width] = found;
  }
}

(async () => {
  const config = JSON.parse(process.argv[2]);
  const out = { blocked: [], consoleErrors: [] };
  const browser = await chromium.launch({
    executablePath: config.chromium || "/usr/bin/chromium",
    args: CHROMIUM_ARGS,
    timeout: 20000,
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.on("console", (msg) => {
      if (msg.type() === "error") out.consoleErrors.push(msg.text());
    });
    page.on("pageerror", (err) => out.consoleErrors.push(String(err)));
    if (config.mode === "live") await live(page, config, out);
    else if (config.mode === "layout") await layout(page, config, out);
    else await staticPage(page, config, out);
    console.log(JSON.stringify(out));
  } catch (e) {
    try {
      out.statusOnFailure = await browser.contexts()[0].pages()[0].evaluate(() => ({
        status: document.getElementById("status").textContent,
        rows: Array.from(document.querySelectorAll("[data-partition]")).map((r) => r.innerText.slice(0, 400)),
      }));
    } catch (ignored) {
      // the page is gone: report what we have
    }
    console.log(JSON.stringify(out));
    console.error(e.stack || String(e));
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
})();
