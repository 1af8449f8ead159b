// The landing page: the registered reactor types (GET /types), each with a button that creates
// an instance (POST /reactors) and opens it in the inspector. A type registered with creation
// parameters has a field for their JSON, filled with its example.
"use strict";

const statusLine = document.getElementById("status");
const list = document.getElementById("types");

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// A problem+json body (or any failed response) as one line of text; for a `401`, what to do
// about the token.
async function problemText(response) {
  const problem = await response.json().catch(() => null);
  if (response.status === 401) return auth.askForToken(problem);
  if (!problem) return `${response.status} ${response.statusText}`;
  return `${problem.title || response.statusText} (${problem.status || response.status}): ${problem.detail || ""}`;
}

async function createAndInspect(typeName, button, parametersField) {
  const body = { type: typeName };
  if (parametersField && parametersField.value.trim() !== "") {
    try {
      body.parameters = JSON.parse(parametersField.value);
    } catch (error) {
      statusLine.textContent = `The parameters of the ${typeName} are not JSON: ${error.message}`;
      parametersField.focus();
      return;
    }
  }
  button.disabled = true;
  statusLine.textContent = `Creating a ${typeName}…`;
  try {
    const response = await auth.fetch("/reactors", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (response.status !== 201) {
      statusLine.textContent = `Could not create a ${typeName}: ${await problemText(response)}`;
      return;
    }
    const snapshot = await response.json();
    window.location.assign(`/inspector#${encodeURIComponent(snapshot.id)}`);
  } catch (error) {
    statusLine.textContent = `Could not create a ${typeName}: ${error.message}`;
  } finally {
    button.disabled = false;
  }
}

function typeItem(type) {
  const item = element("li", "type card");
  item.dataset.type = type.name;
  const headingId = `type-${type.name}`;
  const heading = element("h3", null, type.name);
  heading.id = headingId;
  item.append(heading, element("p", "summary", type.summary));

  const examples = element("details", "examples");
  examples.append(element("summary", null, `Example actions (${type.exampleActions.length})`));
  const exampleList = element("ul");
  for (const action of type.exampleActions) {
    const entry = element("li");
    entry.append(element("code", null, JSON.stringify(action)));
    exampleList.append(entry);
  }
  examples.append(exampleList);
  item.append(examples);

  let parametersField = null;
  if (type.parameters) {
    const label = element("label", "parameters", `Parameters (${type.parameters})`);
    parametersField = element("textarea", "parameters-json");
    parametersField.rows = 2;
    parametersField.spellcheck = false;
    parametersField.value = type.exampleParameters === undefined ? "" : JSON.stringify(type.exampleParameters);
    label.append(parametersField);
    item.append(label);
  }

  const button = element("button", "primary", "Create and inspect");
  button.type = "button";
  button.setAttribute("aria-describedby", headingId);
  button.addEventListener("click", () => createAndInspect(type.name, button, parametersField));
  item.append(button);
  return item;
}

async function loadTypes() {
  try {
    const response = await auth.fetch("/types", { headers: { Accept: "application/json" } });
    if (!response.ok) {
      statusLine.textContent = `Could not load the types: ${await problemText(response)}`;
      return;
    }
    const { types } = await response.json();
    list.replaceChildren(...types.map(typeItem));
    statusLine.textContent = `${types.length} types.`;
  } catch (error) {
    statusLine.textContent = `Could not load the types: ${error.message}`;
  }
}

auth.onChange((token) => {
  statusLine.textContent = token ? "The token is kept for this tab." : "No token: requests go without one.";
});

loadTypes();
