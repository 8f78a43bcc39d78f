// Extensions on the course's Manage Submissions page: the chapter's due date, each learner's
// extension, and a form that gives one learner an extension or takes it back
// (/formgrader/api/course/extensions, autograder/nbgrader_hooks/formgrader/__init__.py).
(function () {
    var api = base_url + "/formgrader/api/course/extensions/" + encodeURIComponent(assignment_id);

    var shown = function (iso) {
        return iso ? new Date(iso).toLocaleString() : "none yet";
    };

    var say = function (text, failed) {
        $("#course-extensions .result").text(text).toggleClass("text-danger", !!failed);
    };

    var change = function (student, query) {
        $.ajax({
            url: api + "/" + encodeURIComponent(student) + "?" + $.param(query),
            type: "POST",
            headers: {"X-CSRFToken": getCookie("_xsrf")},
            dataType: "json",
        }).done(function (answer) {
            say(answer.success ? answer.log : answer.error, !answer.success);
            load();
        }).fail(function (xhr) {
            say("the server refused: " + xhr.status + " " + xhr.statusText, true);
        });
    };

    var load = function () {
        // With the XSRF header, as nbgrader's own requests: a class server's JupyterHub takes a
        // script's GET without it for a stranger's and sends it to log in.
        $.ajax({
            url: api,
            headers: {"X-CSRFToken": getCookie("_xsrf")},
            dataType: "json",
        }).done(function (answer) {
            $("#course-extensions .due").text(shown(answer.due));
            var list = $("#course-extensions ul").empty();
            var learners = Object.keys(answer.extensions);
            if (!learners.length) {
                list.append($("<li/>").addClass("text-muted").text("no extension given"));
            }
            learners.forEach(function (student) {
                var remove = $("<a/>").attr("href", "#").text("take back").click(function () {
                    change(student, {remove: 1});
                    return false;
                });
                list.append($("<li/>").append($("<b/>").text(student)).append(
                    " until " + shown(answer.extensions[student]) + " (").append(remove).append(")"));
            });
        });
    };

    $(function () {
        $("#course-extensions form").submit(function () {
            var student = $(this).find(".student").val().trim();
            var until = $(this).find(".until").val();  // local time, as the instructor typed it
            if (!student || !until) {
                say("name a learner and the end of their extension", true);
            } else {
                change(student, {until: new Date(until).toISOString()});
            }
            return false;
        });
        load();
    });
})();
