"""The chat page at `/`, driven in headless Chromium (Debian's chromium + chromium-driver, with
Selenium from PyPI): type a message, press Enter, read the streamed answer."""
import os
import shutil

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
