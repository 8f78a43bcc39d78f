// "Autograde the chapter" on the course's Manage Submissions page: every submission listed,
// graded (or regraded) one after the other through nbgrader's Autograde of one learner (so the
// course's grading, and on a class server its grading service, which checks the caller's
// role), with a progress bar, the learner being graded, and each learner's outcome as it comes.
(function () {
    var OUTCOME = "Outcome: ";  // autograder/nbgrader_hooks/steps.py marks a step's outcome so

    // The first line of the answer's log is its outcome (autograder/nbgrader_hooks/formgrader).
    var outcomeOf = function (answer) {
        var first = (answer.log || "").split("\n")[0];
        if (first.indexOf(OUTCOME) === 0) {
            return first.slice(OUTCOME.length);
        }
        return answer.success ? "graded" : "failed: " + (answer.error || "no reason given")
            .trim().split("\n").pop();
    };

    var gradeAll = function (panel) {
        if (!models || !models.loaded) {
            panel.find(".summary").text("the submissions are still loading");
            return;
        }
        var students = models.map(function (model) { return model.get("student"); });
        var button = panel.find("button").prop("disabled", true);
        var bar = panel.find(".progress-bar").attr("aria-valuemax", students.length);
        var outcomes = panel.find(".outcomes").empty();
        var done = 0, failed = 0;
        panel.find(".progress").removeClass("hidden");

        var show = function (current) {
            var share = students.length ? done / students.length : 1;
            bar.css("width", Math.round(100 * share) + "%").attr("aria-valuenow", done)
                .text(done + " / " + students.length);
            panel.find(".summary").text(current
                ? "grading " + current + " (" + (done + 1) + " of " + students.length + ")"
                : "graded " + (done - failed) + " of " + students.length
                  + (failed ? "; " + failed + " failed" : ""));
        };

        var said = function (student, text, bad) {
            outcomes.append($("<li/>").toggleClass("text-danger", bad).append(
                $("<b/>").text(student + ": "), $("<span/>").text(text)));
        };

        var next = function () {
            if (done === students.length) {
                show(null);
                bar.toggleClass("progress-bar-danger", failed > 0);
                button.prop("disabled", false);
                models.each(function (model) { model.fetch(); });
                return;
            }
            var student = students[done];
            show(student);
            $.ajax({
                url: base_url + "/formgrader/api/submission/" + encodeURIComponent(assignment_id)
                    + "/" + encodeURIComponent(student) + "/autograde",
                type: "POST",
                headers: {"X-CSRFToken": getCookie("_xsrf")},
                dataType: "json",
            }).done(function (answer) {
                failed += answer.success ? 0 : 1;
                said(student, outcomeOf(answer), !answer.success);
            }).fail(function (xhr) {
                failed += 1;
                said(student, "the server refused: " + xhr.status + " " + xhr.statusText, true);
            }).always(function () {
                done += 1;
                next();
            });
        };
        next();
    };

    $(function () {
        var panel = $("#course-autograde");
        panel.find("button").click(function () {
            gradeAll(panel);
            return false;
        });
    });
})();
