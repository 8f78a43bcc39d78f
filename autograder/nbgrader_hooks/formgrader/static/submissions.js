// The course's additions to nbgrader's Manage Submissions page (manage_submissions.js, loaded
// before this file): a Flags column with each submission's flags and their reasons, and
// learners' names as the gradebook knows them, else their ids (never "None, None"); each copy
// flag, and each graded learner, links to the learner's pairs in the chapter's class report of
// copy detection. nbgrader's Autograde, Generate Feedback and Release Feedback buttons share
// one column, so that the table fits a 1280-pixel screen; Autograde says "regrade" once the
// learner has been graded.
var COPY_FLAGS = ["copied_reference", "similar_submissions"];

// The chapter's class report of copy detection, served by the course's formgrader.
var reportUrl = function () {
    return base_url + "/formgrader/course/similarity/" + encodeURIComponent(assignment_id)
        + ".html";
};

// The learner's pairs in the report; the template links the report only once it is written.
var pairsLink = function (student, text) {
    return $("<a/>").addClass("pairs").attr("target", "_blank")
        .attr("href", reportUrl() + "#learner-" + encodeURIComponent(student)).text(text);
};

(function () {
    insertRow = function (table) {
        var row = $("<tr/>");
        row.append($("<td/>").addClass("student-name"));
        row.append($("<td/>").addClass("text-center student-id"));
        row.append($("<td/>").addClass("text-center timestamp"));
        row.append($("<td/>").addClass("text-center status"));
        row.append($("<td/>").addClass("text-center score"));
        // nbgrader's view finds each button's place by its class, wherever it is in the row.
        row.append($("<td/>").addClass("text-center actions").append(
            $("<span/>").addClass("autograde"), $("<span/>").addClass("generate-feedback"),
            $("<span/>").addClass("release-feedback")));
        row.append($("<td/>").addClass("flags"));
        table.append(row);
        return row;
    };

    var displayName = function (model) {
        var parts = [model.get("last_name"), model.get("first_name")].filter(function (part) {
            return part !== null && part !== undefined && part !== "";
        });
        return parts.length ? parts.join(", ") : model.get("student");
    };

    var nameButtons = function (view, student) {
        var graded = view.model.get("autograded");
        view.$autograde.find("a").attr("title", (graded ? "Regrade " : "Autograde ") + student)
            .append(" " + (graded ? "regrade" : "grade"));
        view.$generate_feedback.find("a").attr("title", "Generate the feedback of " + student);
        view.$release_feedback.find("a").attr("title", "Release the feedback of " + student);
    };

    var nbgraderRender = SubmissionUI.prototype.render;
    SubmissionUI.prototype.render = function () {
        nbgraderRender.apply(this, arguments);
        var student = this.model.get("student");
        var name = displayName(this.model);
        var link = this.$student_name.find("a");
        (link.length ? link : this.$student_name).text(name);
        this.$student_name.attr("data-order", name);
        nameButtons(this, student);

        var cell = this.$el.find(".flags").empty();
        var flags = this.model.get("flags") || [];
        cell.attr("data-order", flags.length);
        var reported = $("#course-similarity a.report").length > 0;
        if (!flags.length) {
            cell.append($("<span/>").addClass("text-muted").text("none"));
        } else {
            var list = $("<ul/>").addClass("course-flags");
            flags.forEach(function (flag) {
                var item = $("<li/>").append(
                    $("<span/>").addClass("label label-danger").text(flag.code));
                if (flag.cell) {
                    item.append(" ").append($("<code/>").text(flag.cell));
                }
                item.append(" ").append($("<span/>").addClass("reason").text(flag.reason));
                if (reported && COPY_FLAGS.indexOf(flag.code) >= 0) {
                    item.append(" ").append(pairsLink(student, "see the pair in the report"));
                }
                list.append(item);
            });
            cell.append(list);
        }
        if (reported && this.model.get("autograded")) {
            cell.append($("<div/>").append(pairsLink(student, "closest pairs")));
        }
    };
})();
