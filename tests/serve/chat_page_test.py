#!/usr/bin/env python3
"""The chat page of `kvik serve` in a real browser (headless Chromium through
selenium): the page loads from the server with nothing from outside, the API
key typed into it reaches the server, a message typed and sent streams a
reply into the page, the reply's statistics (TTFT, tok/s) appear, and Stop
ends a long reply early. A screenshot of the page is kept.

  chat_page_test.py --url http://127.0.0.1:PORT --api-key KEY --screenshot FILE.png

Exit 0 when every check holds; otherwise one line per failed check.
"""
import argparse
import json
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--api-key", required=True)
    ap.add_argument("--screenshot", required=True)
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    a = ap.parse_args()

    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,800"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(a.chromedriver), options=opts)
    failed = []

    def check(cond, what):
        if not cond:
            failed.append(what)
            print("FAIL: " + what, flush=True)

    try:
        drv.get(a.url + "/")
        check(drv.title == "kvik chat", "page title is %r" % drv.title)
        # nothing is loaded from elsewhere: no script, link or image source
        outside = drv.execute_script(
            "return [...document.querySelectorAll('[src],[href]')].map(e => e.src || e.href)"
            ".filter(u => !u.startsWith('data:'))")
        check(not outside, "the page loads outside resources: %r" % outside)
        wait = WebDriverWait(drv, 20)
        # without the key the model list is refused; with it the name shows
        wait.until(lambda d: "model:" in d.find_element(By.ID, "model").text
                   and "loading" not in d.find_element(By.ID, "model").text)
        key = drv.find_element(By.ID, "apikey")
        key.send_keys(a.api_key)
        drv.execute_script("arguments[0].dispatchEvent(new Event('change'))", key)
        wait.until(lambda d: "SmolLM2" in d.find_element(By.ID, "model").text
                   or "smollm" in d.find_element(By.ID, "model").text.lower())
        drv.find_element(By.ID, "temperature").clear()
        drv.find_element(By.ID, "temperature").send_keys("0")
        drv.find_element(By.ID, "max_tokens").clear()
        drv.find_element(By.ID, "max_tokens").send_keys("24")
        box = drv.find_element(By.ID, "input")
        box.send_keys("What is the capital of France?")
        drv.find_element(By.ID, "send").click()
        # the streamed reply appears, then its statistics
        WebDriverWait(drv, 120).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant .stats")
            and "tokens" in d.find_elements(By.CSS_SELECTOR, ".msg.assistant .stats")[-1].text)
        reply = drv.find_elements(By.CSS_SELECTOR, ".msg.assistant .text")[-1].text
        stats = drv.find_elements(By.CSS_SELECTOR, ".msg.assistant .stats")[-1].text
        print("reply: %r" % reply)
        print("stats: %r" % stats)
        check(len(reply.strip()) > 0, "no reply text streamed")
        # the page shows what the server generates for that conversation
        req = urllib.request.Request(
            a.url + "/v1/chat/completions", method="POST",
            headers={"Authorization": "Bearer " + a.api_key, "Content-Type": "application/json"},
            data=json.dumps({"messages": [{"role": "user", "content": "What is the capital of France?"}],
                             "temperature": 0, "top_p": 1, "max_tokens": 24}).encode())
        want = json.load(urllib.request.urlopen(req, timeout=120))["choices"][0]["message"]["content"]
        check(reply == want.strip() or reply == want, "the page shows %r, the server's reply is %r" % (reply, want))
        check("TTFT" in stats and "tok/s" in stats, "statistics missing: %r" % stats)
        user_msgs = drv.find_elements(By.CSS_SELECTOR, ".msg.user .text")
        check(user_msgs and user_msgs[-1].text == "What is the capital of France?", "the user message is not shown")
        # Stop: a long reply ends early with "stopped"
        drv.find_element(By.ID, "max_tokens").clear()
        drv.find_element(By.ID, "max_tokens").send_keys("2000")
        box.send_keys("Write a very long story about a dragon.")
        drv.find_element(By.ID, "send").click()
        WebDriverWait(drv, 120).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant .text")) == 2
            and len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant .text")[-1].text) > 20)
        drv.find_element(By.ID, "stop").click()
        WebDriverWait(drv, 30).until(
            lambda d: "stopped" in d.find_elements(By.CSS_SELECTOR, ".msg.assistant .stats")[-1].text)
        check(drv.find_element(By.ID, "send").is_enabled(), "Send stays disabled after Stop")
        time.sleep(0.2)
        drv.save_screenshot(a.screenshot)
        # the one network error expected: /v1/models refused before the key was typed
        errors = [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"
                  and not ("/v1/models" in e.get("message", "") and "401" in e.get("message", ""))]
        check(not errors, "browser console errors: %r" % errors)
    except Exception as e:  # a timeout or a missing element is a failed check
        try:
            drv.save_screenshot(a.screenshot)
        except Exception:
            pass
        failed.append("%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
        print("FAIL: " + failed[-1], flush=True)
    finally:
        drv.quit()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
