"""The chat page at `/`, driven in headless Chromium (Debian's chromium + chromium-driver, with
Selenium from PyPI): type a message, press Enter, read the streamed answer."""
import os
import shutil
import time

import pytest

from conftest import IN_CI
from server_util import Server

CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        if IN_CI:
            pytest.fail("selenium is missing (make test installs it)")
        pytest.skip("selenium is not installed")
    if not (os.path.exists(CHROMEDRIVER) and os.path.exists(CHROMIUM)):
        if IN_CI:
            pytest.fail("chromium / chromium-driver are missing (make test installs them)")
        pytest.skip("chromium / chromium-driver are not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def server(model):
    s = Server(model, "--served-model-name", "smollm2-135m-instruct")
    yield s
    s.stop()


def test_type_a_message_and_read_the_streamed_answer(browser, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server.url + "/")
    assert "DeepInfer" in browser.title
    WebDriverWait(browser, 30).until(lambda d: "smollm2" in d.find_element(By.ID, "model").text)
    browser.find_element(By.ID, "temperature").clear()
    browser.find_element(By.ID, "temperature").send_keys("0")
    box = browser.find_element(By.ID, "prompt")
    box.send_keys("What is the capital of France?")
    box.send_keys(Keys.ENTER)
    done = WebDriverWait(browser, 120).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-done]"))
    answer = done[0].text
    assert "Paris" in answer, answer
    assert "tok/s" in answer  # the usage line from the final stream chunk
    user = browser.find_elements(By.CSS_SELECTOR, ".msg.user")
    assert user and user[0].text == "What is the capital of France?"


def open_page(browser, server, max_tokens, temperature="1"):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    browser.get(server.url + "/")
    WebDriverWait(browser, 30).until(lambda d: "smollm2" in d.find_element(By.ID, "model").text)
    for field, value in [("temperature", temperature), ("max_tokens", str(max_tokens)), ("seed", "7")]:
        browser.find_element(By.ID, field).clear()
        browser.find_element(By.ID, field).send_keys(value)
    # Record each request body the page sends.
    browser.execute_script("""window.__bodies = []; const f = window.fetch;
        window.fetch = (u, o) => { if (o && o.body) window.__bodies.push(JSON.parse(o.body)); return f(u, o); };""")


def type_and_enter(browser, text):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    box = browser.find_element(By.ID, "prompt")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def test_one_reply_at_a_time_and_stop_keeps_the_conversation(browser, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    open_page(browser, server, max_tokens=2000)
    aborted = server.metrics()["deepinfer_aborted_requests_total"]
    type_and_enter(browser, "Write a very long story about a dragon and a knight.")
    streaming = WebDriverWait(browser, 60).until(
        lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-streaming]") if e.text])
    assert browser.find_element(By.ID, "send").get_attribute("disabled") is not None
    assert browser.find_element(By.ID, "stop").get_attribute("disabled") is None
    type_and_enter(browser, "A second question while the first streams")  # Enter must not send it
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg.user")) == 1
    assert len(browser.execute_script("return window.__bodies")) == 1
    browser.find_element(By.ID, "stop").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-stopped]"))
    assert browser.find_element(By.ID, "send").get_attribute("disabled") is None
    assert browser.find_element(By.ID, "stop").get_attribute("disabled") is not None
    # The server noticed the abort and freed the sequence.
    deadline = time.time() + 5
    while time.time() < deadline and server.metrics()["deepinfer_num_requests_running"] != 0:
        time.sleep(0.1)
    m = server.metrics()
    assert m["deepinfer_num_requests_running"] == 0
    assert m["deepinfer_aborted_requests_total"] == aborted + 1
    # The next request carries the first question and the partial answer, in order.
    partial = browser.find_element(By.CSS_SELECTOR, ".msg.assistant[data-stopped]").text
    browser.find_element(By.ID, "prompt").clear()
    browser.find_element(By.ID, "max_tokens").clear()
    browser.find_element(By.ID, "max_tokens").send_keys("4")
    type_and_enter(browser, "Thanks")
    WebDriverWait(browser, 60).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-done]")) == 2)
    sent = browser.execute_script("return window.__bodies")[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] and partial.startswith(sent[1]["content"][:20])


def test_a_reply_cut_at_max_tokens_says_so(browser, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    open_page(browser, server, max_tokens=3)
    type_and_enter(browser, "Tell me about the history of Rome.")
    done = WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-done]"))
    assert done[0].get_attribute("data-cut") == "1"
    assert "cut at max tokens" in done[0].text


def test_model_label_follows_the_api_key(browser, model):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
    s = Server(model, "--served-model-name", "smollm2-135m-instruct", "--api-key", "sekret")
    try:
        browser.get(s.url + "/")
        WebDriverWait(browser, 30).until(lambda d: "API key" in d.find_element(By.ID, "model").text)
        key = browser.find_element(By.ID, "apikey")
        key.send_keys("sekret")
        key.send_keys(Keys.TAB)  # change event
        WebDriverWait(browser, 30).until(lambda d: "smollm2" in d.find_element(By.ID, "model").text)
        type_and_enter(browser, "Hi")
        done = WebDriverWait(browser, 60).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-done], .msg.error"))
        assert "error" not in done[0].get_attribute("class"), done[0].text
    finally:
        s.stop()
