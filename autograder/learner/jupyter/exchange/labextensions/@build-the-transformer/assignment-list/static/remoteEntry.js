/*
 * nbgrader's Assignment List as the course uses it.
 *
 * - "(view feedback)" opens the feedback page itself. nbgrader 0.9's link only runs
 *   `filebrowser:go-to-path` on the submission's feedback folder,
 *   <chapter>/feedback/<timestamp>, so the learner lands in a folder and has to find the page.
 *   This plugin watches that command and, once it has run on such a folder, opens each HTML
 *   page in it with JupyterLab's default viewer for HTML (the HTML Viewer; the pages hold no
 *   script, see autograder/steps/feedback.py).
 * - A refused submission reads as its sentence. nbgrader's "Invalid Submission" dialog shows
 *   the server's whole traceback, whose last line, the reason, runs off the dialog's edge
 *   (autograder/learner/submit.py refuses a chapter whose answers the learner can read). The
 *   plugin shows the reason alone.
 * - "Fetch Feedback" only where there is feedback to fetch. nbgrader offers the button on
 *   every submitted chapter, before any feedback exists; the plugin shows it only on a chapter
 *   one of whose submissions nbgrader marks "(feedback available to fetch)".
 *
 * JupyterLab loads prebuilt extensions as module-federation containers: a script that puts
 * {init, get} under window._JUPYTERLAB[<package name>]. This plugin imports nothing (it
 * uses only the application object JupyterLab hands it and the page), so the container is
 * written by hand and needs no build step and no npm.
 */
(function () {
  'use strict';

  var NAME = '@build-the-transformer/assignment-list';
  // The folder nbgrader's ExchangeList names as a submission's local feedback.
  var FEEDBACK_FOLDER = /(^|\/)feedback\/[^/]+\/?$/;
  // The last line of a Python traceback of nbgrader's exchange: its error and the reason.
  var EXCHANGE_ERROR = /\n[\w.]*ExchangeError: ([\s\S]*)$/;
  // What nbgrader writes beside a submission whose feedback waits in the exchange.
  var FEEDBACK_TO_FETCH = /\(feedback available to fetch\)/;

  function openFeedback(app, folder) {
    return app.serviceManager.contents.get(folder, { content: true }).then(function (model) {
      var pages = model.content.filter(function (item) {
        return item.type === 'file' && /\.html$/.test(item.name);
      });
      return Promise.all(pages.map(function (item) {
        return app.commands.execute('docmanager:open', { path: item.path });
      }));
    });
  }

  function watchFeedbackLinks(app) {
    app.commands.commandExecuted.connect(function (_, executed) {
      var path = executed.args && executed.args.path;
      if (executed.id !== 'filebrowser:go-to-path' || typeof path !== 'string'
          || !FEEDBACK_FOLDER.test(path)) {
        return;
      }
      Promise.resolve(executed.result).then(function () {
        return openFeedback(app, path.replace(/\/$/, ''));
      }).catch(function (error) {
        console.error(NAME + ': could not open the feedback in ' + path, error);
      });
    });
  }

  // nbgrader's dialog puts the traceback in a <pre> of the dialog's body.
  function tidyRefusals() {
    document.querySelectorAll('.jp-Dialog pre').forEach(function (pre) {
      var found = EXCHANGE_ERROR.exec(pre.textContent || '');
      if (found && /^Traceback/.test(pre.textContent)) {
        pre.textContent = found[1].trim();
        pre.style.whiteSpace = 'pre-wrap';
      }
    });
  }

  // A submitted chapter's row holds its button and, below it, a line per submission.
  function fetchFeedbackOnlyWhenThere() {
    document.querySelectorAll('#submitted_assignments_list button').forEach(function (button) {
      if (button.textContent !== 'Fetch Feedback') {
        return;
      }
      var row = button.closest('.list_item');
      var available = !!row && FEEDBACK_TO_FETCH.test(row.textContent || '');
      button.style.display = available ? '' : 'none';
    });
  }

  // nbgrader rebuilds the lists and opens its dialogs as it goes: tidy each change.
  function watchAssignmentList() {
    new MutationObserver(function () {
      tidyRefusals();
      fetchFeedbackOnlyWhenThere();
    }).observe(document.body, { childList: true, subtree: true });
  }

  var plugin = {
    id: NAME + ':plugin',
    description: 'The Assignment List\'s "(view feedback)" opens the page; a refused '
      + 'submission reads as its sentence; "Fetch Feedback" only where there is feedback.',
    autoStart: true,
    activate: function (app) {
      watchFeedbackLinks(app);
      watchAssignmentList();
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: function () { return Promise.resolve(); },
    get: function (module) {
      if (module !== './extension') {
        return Promise.reject(new Error(NAME + ' has no module ' + module));
      }
      return Promise.resolve(function () { return { __esModule: true, default: [plugin] }; });
    }
  };
})();
